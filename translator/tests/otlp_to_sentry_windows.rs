//! Issue #33: the translation holds one window of one session, not the session.
//!
//! A request with many consecutive profiles of one session, the same request with its profiles
//! (and their samples) out of order, long profiles whose samples each span minutes (timestamps
//! in order, out of order, or aggregated values) and several interleaved sessions, cut by time
//! and by size: each
//! translates to exactly the chunks, links and counters of the whole-session oracle
//! (`testing::to_chunks_whole`, every observation of a session read, sorted and cut, as before
//! windows existed), keeps every observation (compared one by one with a brute-force reading of
//! the request), and the translation reports (`ChunkTranslation::held`) that it never held more
//! than one session, nor observations spanning more than one window (the chunk duration plus a
//! quarter of it), nor more observations than the request has in such a span.

mod otlp_to_sentry_support;

use otlp_to_sentry_support::{
    B, Obs, actual_observations, assert_same_observations, expected_observations, int_value, kv,
    resource, sample, str_value,
};
use profilink_proto::otlp::{ExportProfilesServiceRequest, Profile, Sample};
use profilink_translator::otlp_to_sentry::{
    ChunkOptions, ChunkTranslation, SparseThreadPolicy, to_chunks, to_chunks_streamed,
};
use profilink_translator::testing::to_chunks_whole;

const T0: u64 = 1_795_317_063_000_000_000;
const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One process (`pid`) profiled for `profiles` consecutive profiles of `profile_s` seconds:
/// `threads` threads sampled together every 50 ms (the same timestamp on every thread, as
/// sentry-python does), stacks from a few functions, one OTLP sample per (stack, thread, link)
/// and second of each profile; a third of the samples linked to a span.
fn session_profiles(
    b: &mut B,
    pid: i64,
    profiles: u64,
    profile_s: u64,
    threads: i64,
) -> Vec<Profile> {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ pid as u64);
    let locs: Vec<i32> = ["main", "serve", "handle", "query", "render", "wait"]
        .iter()
        .enumerate()
        .map(|(i, f)| b.fn_loc(f, "/app/app.py", i as i64 + 1, "cpython"))
        .collect();
    let stacks: Vec<i32> = (0..12)
        .map(|k| {
            let depth = 1 + k % locs.len();
            let ls: Vec<i32> = (0..depth).map(|d| locs[(k + d) % locs.len()]).collect();
            b.stack(&ls)
        })
        .collect();
    let links: Vec<i32> = (1..=4u8).map(|k| b.link([k; 16], [k; 8])).collect();
    let thread_attrs: Vec<Vec<i32>> = (0..threads)
        .map(|t| {
            vec![
                b.attr_int("thread.id", pid * 1000 + t),
                b.attr_str("thread.name", &format!("worker-{t}")),
            ]
        })
        .collect();
    (0..profiles)
        .map(|p| {
            let start = T0 + p * profile_s * S;
            let mut samples: Vec<Sample> = Vec::new();
            for second in 0..profile_s {
                // (stack, thread, link) -> timestamps within this second.
                let mut groups: Vec<((i32, usize, i32), Vec<u64>)> = Vec::new();
                for tick in 0..20 {
                    let ts = start + second * S + tick * 50 * MS;
                    for (t, _) in thread_attrs.iter().enumerate() {
                        let stack = stacks[rng.below(stacks.len() as u64) as usize];
                        let link = if rng.below(3) == 0 {
                            links[rng.below(links.len() as u64) as usize]
                        } else {
                            0
                        };
                        let key = (stack, t, link);
                        match groups.iter_mut().find(|g| g.0 == key) {
                            Some(g) => g.1.push(ts),
                            None => groups.push((key, vec![ts])),
                        }
                    }
                }
                samples.extend(groups.into_iter().map(|((stack, t, link), ts)| Sample {
                    link_index: link,
                    ..sample(stack, thread_attrs[t].clone(), ts)
                }));
            }
            b.cpu_profile(start, profile_s * S, samples)
        })
        .collect()
}

fn process(pid: i64, profiles: Vec<Profile>) -> profilink_proto::otlp::ResourceProfiles {
    resource(
        vec![
            kv("process.pid", int_value(pid)),
            kv("service.name", str_value("shop")),
        ],
        profiles,
    )
}

/// The options the tests run under: the defaults (60 s chunks), 1 s chunks (many windows per
/// profile), sparse threads dropped, and chunks cut by size many times per window.
fn option_sets() -> Vec<(&'static str, ChunkOptions)> {
    vec![
        ("default", ChunkOptions::default()),
        (
            "1 s chunks",
            ChunkOptions {
                max_chunk_duration_ns: S,
                ..ChunkOptions::default()
            },
        ),
        (
            "sparse dropped, 64 KiB chunks",
            ChunkOptions {
                sparse_thread_policy: SparseThreadPolicy::Drop,
                max_chunk_bytes: 64 * 1024,
                ..ChunkOptions::default()
            },
        ),
        (
            "4 KiB chunks (many per window)",
            ChunkOptions {
                max_chunk_bytes: 4 * 1024,
                ..ChunkOptions::default()
            },
        ),
    ]
}

/// The most of these observations within any `span` nanoseconds (of all sessions together).
fn most_within(observations: &[Obs], span: u64) -> u64 {
    let mut ts: Vec<u64> = observations.iter().map(|o| o.1).collect();
    ts.sort_unstable();
    let (mut most, mut lo) = (0, 0);
    for hi in 0..ts.len() {
        while ts[hi] - ts[lo] > span {
            lo += 1;
        }
        most = most.max(hi + 1 - lo);
    }
    most as u64
}

/// The window-by-window translation equals the whole-session oracle, chunk by chunk and byte
/// by byte, keeps every observation, and holds one window of one session. Returns it.
fn assert_streams_like_whole(
    name: &str,
    req: &ExportProfilesServiceRequest,
    opts: &ChunkOptions,
) -> ChunkTranslation {
    let expected = expected_observations(req, opts.max_stack_depth);
    let whole = to_chunks_whole(req.dictionary.as_ref(), &req.resource_profiles, opts);
    let (mut chunks, mut links) = (Vec::new(), Vec::new());
    let mut t = to_chunks_streamed(
        req.dictionary.as_ref(),
        &req.resource_profiles,
        opts,
        &mut |c, l| {
            chunks.push(c);
            links.extend(l);
        },
    );
    assert!(!whole.chunks.is_empty(), "{name}: no chunks");
    assert_eq!(chunks.len(), whole.chunks.len(), "{name}: chunk count");
    for (i, (s, w)) in chunks.iter().zip(&whole.chunks).enumerate() {
        assert_eq!(s.to_json(), w.to_json(), "{name}: chunk {i} differs");
    }
    assert_eq!(links, whole.links, "{name}: links");
    assert_eq!(t.rejected, whole.rejected, "{name}: rejected");
    assert_eq!(t.stats, whole.stats, "{name}: stats");
    // `to_chunks` (and so the service's `to_chunks_with`) streams too.
    let collected = to_chunks(req.dictionary.as_ref(), &req.resource_profiles, opts);
    assert_eq!(collected.chunks, chunks, "{name}: to_chunks");
    assert_eq!(collected.links, links, "{name}: to_chunks links");

    // Observation by observation, against the request read by brute force.
    t.chunks = chunks;
    if opts.sparse_thread_policy == SparseThreadPolicy::Drop {
        assert_eq!(
            t.stats.samples_out + t.stats.samples_dropped_sparse + t.stats.samples_dropped_size,
            t.stats.samples_in,
            "{name}: counted"
        );
    } else {
        let mut actual = actual_observations(&t);
        let mut expected = expected.clone();
        // Grouped sparse threads change their thread ids (there are none in most requests).
        if t.stats.samples_grouped > 0 {
            for o in actual.iter_mut().chain(expected.iter_mut()) {
                o.0.clear();
            }
        }
        assert_same_observations(actual, expected);
    }

    // What it held: one session at a time; observations within one window (the chunk
    // duration plus the block span, a quarter of it) and no more than the request has there.
    let window = opts.max_chunk_duration_ns + opts.max_chunk_duration_ns / 4;
    assert_eq!(t.held.peak_sessions, 1, "{name}: sessions held");
    if t.stats.sessions == 1 {
        assert_eq!(
            whole.held.peak_observations, whole.stats.samples_in,
            "{name}: the oracle holds every observation of the session"
        );
    }
    assert!(
        t.held.peak_span_ns <= window,
        "{name}: held {} ns of observations, more than a window ({window} ns)",
        t.held.peak_span_ns
    );
    let most = most_within(&expected, window);
    assert!(
        t.held.peak_observations <= most,
        "{name}: held {} observations, more than the request has in a window ({most})",
        t.held.peak_observations,
    );
    t
}

#[test]
fn many_consecutive_profiles_of_one_session_stream_like_whole() {
    let mut b = B::new();
    // 24 consecutive 65 s profiles of one process, 4 threads: 124,800 observations.
    let profiles = session_profiles(&mut b, 4242, 24, 65, 4);
    let req = b.request(vec![process(4242, profiles)]);
    for (name, opts) in option_sets() {
        let t = assert_streams_like_whole(name, &req, &opts);
        assert_eq!(t.stats.sessions, 1);
        assert_eq!(t.stats.samples_in, 24 * 65 * 20 * 4);
        // A window is a small part of the session.
        assert!(
            t.held.peak_observations * 20 < t.stats.samples_in,
            "{name}: held {} of {} observations",
            t.held.peak_observations,
            t.stats.samples_in
        );
    }
}

#[test]
fn profiles_out_of_order_stream_like_whole() {
    let mut b = B::new();
    // Two processes, 12 consecutive 65 s profiles each, the profiles of both interleaved in a
    // shuffled order, each profile's samples reversed (so that the latest come first).
    let mut a = session_profiles(&mut b, 7, 12, 65, 4);
    let mut c = session_profiles(&mut b, 8, 12, 65, 3);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut all: Vec<(i64, Profile)> = a.drain(..).map(|p| (7, p)).collect();
    all.extend(c.drain(..).map(|p| (8, p)));
    for i in (1..all.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        all.swap(i, j);
    }
    // One resource per profile, in the shuffled order (as a batch of exports would be).
    let rps = all
        .into_iter()
        .map(|(pid, mut p)| {
            p.samples.reverse();
            process(pid, vec![p])
        })
        .collect();
    let req = b.request(rps);
    for (name, opts) in option_sets() {
        let t = assert_streams_like_whole(&format!("out of order, {name}"), &req, &opts);
        assert_eq!(t.stats.sessions, 2);
        assert!(t.held.peak_observations * 10 < t.stats.samples_in);
    }
}

/// One 10-minute profile whose every sample spans all of it: timestamps in order, out of
/// order, or aggregated values spread over the profile.
#[test]
fn samples_spanning_many_windows_stream_like_whole() {
    let mut b = B::new();
    let locs: Vec<i32> = ["run", "step", "io"]
        .iter()
        .map(|f| b.fn_loc(f, "/app/main.go", 1, "go"))
        .collect();
    let stacks = [b.stack(&locs[..1]), b.stack(&locs[..2]), b.stack(&locs)];
    let threads: Vec<Vec<i32>> = (1..=2).map(|t| vec![b.attr_int("thread.id", t)]).collect();
    let span = 600 * S;
    let in_order: Vec<Sample> = stacks
        .iter()
        .enumerate()
        .map(|(k, &st)| {
            let ts = (0..3000)
                .map(|i| T0 + i * 200 * MS + k as u64 * MS)
                .collect();
            sample(st, threads[k % 2].clone(), ts)
        })
        .collect();
    let ordered = b.cpu_profile(T0, span, in_order.clone());
    let mut shuffled = in_order;
    for s in &mut shuffled {
        s.timestamps_unix_nano.reverse();
        s.timestamps_unix_nano.swap(5, 2000);
    }
    let unordered = b.cpu_profile(T0, span, shuffled);
    let aggregated = b.cpu_profile(
        T0 + span,
        span,
        stacks
            .iter()
            .enumerate()
            .map(|(k, &st)| Sample {
                values: vec![1000 + k as i64],
                ..sample(st, threads[k % 2].clone(), vec![])
            })
            .collect(),
    );
    for (what, profile) in [
        ("timestamps in order", ordered),
        ("timestamps out of order", unordered),
        ("aggregated values", aggregated),
    ] {
        let req = ExportProfilesServiceRequest {
            resource_profiles: vec![process(9, vec![profile])],
            dictionary: Some(b.d.clone()),
        };
        for (name, opts) in option_sets() {
            assert_streams_like_whole(&format!("{what}, {name}"), &req, &opts);
        }
    }
}
