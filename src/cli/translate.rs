//! `profilink translate`: OTLP -> Sentry chunks (NDJSON or envelope files), Sentry -> OTLP
//! (protobuf or OTLP/JSON), OTLP protobuf <-> OTLP/JSON; pprof and folded inputs are read as
//! OTLP, and `--to pprof` is [`super::translate_pprof`].

use super::input::{Input, read_input};
use super::output::{dir_and_name, write_output};
use super::{EXIT_OK, EXIT_REJECTED, EXIT_USAGE, OutputFormat, SparseThreads};
use anyhow::{Context, Result, bail};
use profilink_exporter::{SDK_NAME, VERSION};
use profilink_exporter::{envelope_file_name, write_atomic_with};
use profilink_proto::input::InputFormat;
use profilink_proto::otlp::ExportProfilesServiceRequest;
use profilink_proto::otlp_json;
use profilink_proto::sentry::{Envelope, ProfileChunk};
use profilink_symbolizer::{Symbolizer, SymbolizerConfig};
use profilink_translator::{
    InputError, SentryParts, TransactionLinks, decode_otlp_report, ndjson_chunk, ndjson_lines,
    otlp_to_sentry, sentry_to_otlp,
};
use prost::Message;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Arguments of `translate`.
pub struct Args<'a> {
    /// Output format.
    pub to: OutputFormat,
    /// Forced input format.
    pub from: Option<InputFormat>,
    /// Output file or directory.
    pub output: Option<&'a Path>,
    /// Transaction files.
    pub transactions: &'a [PathBuf],
    /// Threads Relay would drop: grouped first, or dropped.
    pub sparse_threads: SparseThreads,
    /// The sample-type table (the built-in one plus `--cpu-sample-type` pairs).
    pub sample_types: otlp_to_sentry::SampleTypes,
    /// Symbolize native frames of OTLP inputs first, with this config.
    pub symbolize: Option<SymbolizerConfig>,
    /// Inputs.
    pub inputs: &'a [PathBuf],
}

/// Everything read from the inputs, sorted by kind.
#[derive(Default)]
struct Gathered {
    otlp: Vec<(String, ExportProfilesServiceRequest)>,
    sentry: SentryParts,
    /// NDJSON chunk inputs bound for OTLP, parsed only when translated (see [`to_otlp`]).
    ndjson: Vec<Deferred>,
}

/// An NDJSON chunk input read but not parsed yet.
struct Deferred {
    /// Its name.
    name: String,
    /// Its bytes.
    bytes: Vec<u8>,
    /// How many chunks of [`SentryParts::chunks`] come before its own.
    after: usize,
}

/// Runs `translate`; `Err` is a rejected input (exit 1).
pub fn run(args: &Args) -> Result<u8> {
    if args.to == OutputFormat::Envelope && args.output.is_none() {
        eprintln!("error: --to envelope needs --output DIR");
        return Ok(EXIT_USAGE);
    }
    let mut g = Gathered::default();
    let to_otlp_request = matches!(args.to, OutputFormat::Otlp | OutputFormat::OtlpJson);
    for path in args.inputs {
        let input = read_input(path, args.from)?;
        let name = input.name.clone();
        gather(input, &mut g, to_otlp_request).with_context(|| format!("{name}: rejected"))?;
    }
    for path in args.transactions {
        let input = read_input(path, None)?;
        g.sentry
            .read_transactions(&input.bytes, input.format)
            .with_context(|| format!("{}: rejected", input.name))?;
    }
    if let Some(cfg) = &args.symbolize {
        symbolize(cfg, &mut g);
    }
    match args.to {
        OutputFormat::Sentry | OutputFormat::Envelope => to_sentry(args, g),
        OutputFormat::Otlp | OutputFormat::OtlpJson => to_otlp(args, g),
        OutputFormat::Pprof => to_pprof(args, g),
    }
}

/// `--to pprof`: the one OTLP request of the inputs (an OTLP, pprof or folded input, or the
/// Sentry inputs) as gzipped pprof.
fn to_pprof(args: &Args, mut g: Gathered) -> Result<u8> {
    let sentry =
        !(g.sentry.chunks.is_empty() && g.sentry.v1_profiles.is_empty() && g.ndjson.is_empty());
    let (name, request) = match (sentry, g.otlp.len()) {
        (false, 1) => g.otlp.remove(0),
        (false, 0) => bail!("no profiles in the inputs"),
        (true, 0) => (
            "Sentry inputs".to_owned(),
            sentry_to_otlp_request(g)?.request,
        ),
        _ => bail!("--to pprof takes one OTLP, pprof or folded input, or Sentry inputs"),
    };
    super::translate_pprof::write_pprof(&name, &request, args.output)
}

/// The symbolizer config of `--symbolize` and its flags: debug directories (default
/// `/usr/lib/debug`), debuginfod URLs (default `DEBUGINFOD_URLS`), the download cache, and a
/// wait as long as one download may take (an offline command waits for its downloads).
pub fn symbolize_config(
    debug_dirs: Vec<PathBuf>,
    debuginfod: Vec<String>,
    symbol_cache: Option<PathBuf>,
) -> SymbolizerConfig {
    let mut cfg = SymbolizerConfig::default();
    if !debug_dirs.is_empty() {
        cfg.debug_dirs = debug_dirs;
    }
    if !debuginfod.is_empty() {
        cfg.debuginfod.urls = Some(debuginfod);
    }
    cfg.debuginfod.cache_dir = symbol_cache;
    cfg.wait = cfg.debuginfod.timeout;
    cfg
}

/// Names the native frames of every OTLP input; says on stderr what was named and why the
/// rest was not.
fn symbolize(cfg: &SymbolizerConfig, g: &mut Gathered) {
    let symbolizer = Symbolizer::new(cfg.clone());
    for (name, req) in &mut g.otlp {
        let s = symbolizer.symbolize_request(req);
        let mut rest: Vec<String> = s
            .unsymbolized
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        rest.sort();
        let rest = if rest.is_empty() {
            String::new()
        } else {
            format!(", not: {}", rest.join(", "))
        };
        eprintln!("{name}: symbolized {} native frame(s){rest}", s.symbolized);
    }
}

/// Says what lenient decoding did to an input (invalid UTF-8 replaced, proto 1.9 layout).
fn note_decode(name: &str, report: &profilink_proto::wire::DecodeReport) {
    if report.utf8_replacements > 0 {
        eprintln!(
            "{name}: replaced {} invalid UTF-8 sequence(s) in strings with U+FFFD",
            report.utf8_replacements
        );
    }
    if let Some(reason) = report.layout_reason {
        eprintln!(
            "{name}: read in the proto 1.9 Sample layout (values=2, attribute_indices=3, link_index=4; {}); the producer predates proto 1.10",
            match reason {
                profilink_proto::wire::LayoutReason::DecodeError => "it does not decode as 1.10",
                profilink_proto::wire::LayoutReason::Inconsistent =>
                    "as 1.10 it breaks the dictionary's bounds or the samples' shapes",
            }
        );
    }
}

/// Adds one input to `g`: an OTLP request, or the Sentry chunks, V1 profiles and
/// transactions it holds (the library's readers, [`decode_otlp_report`] and [`SentryParts`]).
///
/// NDJSON of chunks bound for OTLP (`defer_ndjson`) is kept as bytes, parsed when translated:
/// its chunks then need not all be held at once.
fn gather(input: Input, g: &mut Gathered, defer_ndjson: bool) -> Result<()> {
    if matches!(input.format, InputFormat::Pprof | InputFormat::Folded) {
        let request = super::translate_pprof::read_request(&input)?;
        g.otlp.push((input.name, request));
    } else if input.format.is_otlp() {
        let (request, report) = decode_otlp_report(&input.bytes, Some(input.format))?;
        note_decode(&input.name, &report);
        g.otlp.push((input.name, request));
    } else if defer_ndjson
        && input.format == InputFormat::SentryChunkNdjson
        && ndjson_lines(&input.bytes).next().is_some()
    {
        g.ndjson.push(Deferred {
            name: input.name,
            bytes: input.bytes,
            after: g.sentry.chunks.len(),
        });
    } else {
        g.sentry.read(&input.bytes, input.format)?;
    }
    Ok(())
}

fn to_sentry(args: &Args, g: Gathered) -> Result<u8> {
    if !g.sentry.v1_profiles.is_empty() {
        bail!("V1 profiles cannot be written as chunks; translate them --to otlp");
    }
    // Emit only what Relay keeps: a thread with fewer than 2 samples is dropped by Relay, and a
    // chunk left without threads is rejected whole, so group such threads (unless told not
    // to), drop what is still sparse here and say so. (The service does the same once its
    // accumulator has merged a minute of samples.)
    let options = otlp_to_sentry::ChunkOptions {
        sparse_thread_grouping: match args.sparse_threads {
            SparseThreads::Group => otlp_to_sentry::SparseThreadGrouping::Group,
            SparseThreads::Drop => otlp_to_sentry::SparseThreadGrouping::None,
        },
        sparse_thread_policy: otlp_to_sentry::SparseThreadPolicy::Drop,
        // Chunks cannot carry trace links and the output has no other place for them: none
        // are made (building one per linked observation was a third of the translation).
        max_links: 0,
        sample_types: args.sample_types.clone(),
        ..Default::default()
    };
    // Each chunk is written as soon as it is cut, so memory holds the inputs and one window
    // of one session, never the whole output.
    let (code, written) = match (args.to, args.output) {
        (OutputFormat::Envelope, dir) => {
            let dir = dir.context("--to envelope needs --output DIR")?;
            // The same files as the file exporter writes; one JSON buffer serves every chunk.
            let mut json = Vec::new();
            emit_chunks(g, &options, &mut |chunk| {
                json.clear();
                chunk.write_json(&mut json);
                let env = Envelope::for_chunk_json(
                    std::mem::take(&mut json),
                    &chunk.platform,
                    SDK_NAME,
                    VERSION,
                );
                let name = envelope_file_name(&chunk.chunk_id);
                let written = write_atomic_with(dir, &name, |w| env.write_to(w))
                    .with_context(|| format!("cannot write {}", dir.join(&name).display()));
                json = env
                    .items
                    .into_iter()
                    .next()
                    .map(|i| i.payload)
                    .unwrap_or_default();
                written
            })?
        }
        (_, Some(path)) => {
            let (dir, name) = dir_and_name(path)?;
            // Into a temporary file renamed into place at the end: the output stays atomic.
            write_atomic_with(dir, &name, |w| write_ndjson(w, g, &options))
                .with_context(|| format!("cannot write {}", path.display()))?
        }
        (_, None) => {
            // Unlocked (a lock cannot move to the writing thread): locked once per 256 KiB.
            let mut w = BufWriter::with_capacity(STDOUT_BUFFER, std::io::stdout());
            let out = write_ndjson(&mut w, g, &options)?;
            w.flush()?;
            out
        }
    };
    eprintln!("{written} chunk(s) written");
    Ok(code)
}

/// Buffer between the NDJSON lines and standard output.
const STDOUT_BUFFER: usize = 256 * 1024;

/// Size from which [`write_ndjson`] hands a block to its writing thread (a block holds whole
/// lines, so one may be larger).
const BLOCK: usize = 256 * 1024;

/// Full blocks waiting for the writing thread, at most (see [`write_ndjson`]).
const BLOCKS_AHEAD: usize = 2;

/// Writes every chunk of `g` to `w` as one NDJSON line (the bytes of [`ProfileChunk::to_json`]
/// and `\n`, written by [`ProfileChunk::write_json`]) as [`emit_chunks`] hands them out. The
/// lines are serialized into blocks of [`BLOCK`] bytes or more, written to `w` by a third
/// thread, so that the serializing thread, which bounds the whole, does not also copy the
/// output into the file (a tenth of the time on the eBPF-shaped benchmark); written blocks
/// come back to be filled again, and at most [`BLOCKS_AHEAD`] wait.
fn write_ndjson<W: Write + Send>(
    w: &mut W,
    g: Gathered,
    options: &otlp_to_sentry::ChunkOptions,
) -> std::io::Result<(u8, usize)> {
    let (full, to_write) = std::sync::mpsc::sync_channel::<Vec<u8>>(BLOCKS_AHEAD);
    let (free, freed) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || -> std::io::Result<()> {
            for block in to_write {
                // On an error the receiver goes away and the serializing side stops.
                w.write_all(&block)?;
                drop(free.send(block));
            }
            Ok(())
        });
        let mut out = Handoff {
            block: Vec::with_capacity(BLOCK),
            full,
            freed,
        };
        let made = emit_chunks(g, options, &mut |chunk| {
            // Straight into the block (a block holds at least one whole line).
            chunk.write_json(&mut out.block);
            out.block.push(b'\n');
            if out.block.len() >= BLOCK {
                out.send_block()?;
            }
            Ok(())
        });
        let made = made.and_then(|m| out.send_block().map(|()| m));
        drop(out);
        let written = writer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        // The writer's own error explains a stop better than the send that noticed it.
        written.and(made)
    })
}

/// The serializing side of [`write_ndjson`]: a buffer whose full blocks go to the writing
/// thread.
struct Handoff {
    block: Vec<u8>,
    full: std::sync::mpsc::SyncSender<Vec<u8>>,
    freed: std::sync::mpsc::Receiver<Vec<u8>>,
}

impl Handoff {
    /// Hands the block filled so far to the writing thread (if any) and takes an empty one.
    fn send_block(&mut self) -> std::io::Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let mut next = self
            .freed
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BLOCK));
        next.clear();
        let block = std::mem::replace(&mut self.block, next);
        self.full
            .send(block)
            .map_err(|_| std::io::Error::other("the output writer stopped"))
    }
}

impl Write for Handoff {
    #[inline]
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }

    /// Like `BufWriter`'s: the serializer's many small writes are a copy each (the default
    /// `write_all` loop made serializing a third slower).
    #[inline]
    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.block.len() + data.len() > BLOCK {
            self.send_block()?;
        }
        self.block.extend_from_slice(data);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Chunks made but not taken by the writer yet, at most (see [`emit_chunks`]).
const PIPELINE: usize = 1;

/// Hands every chunk of the gathered inputs to `write` as it is produced: the Sentry chunks
/// read, then the chunks of each OTLP request as the translator cuts them, one window of one
/// session at a time (each request is dropped once translated). `write` runs on a second
/// thread, so serializing and writing overlap translating (on this thread, which reuses the
/// memory the inputs were read into); at most [`PIPELINE`] chunks wait in between, and each
/// written chunk comes back to be freed here. Reports rejected profiles, skipped profiles and
/// dropped samples on stderr. After the first write error nothing more is written and that
/// error is returned. Returns the exit code and the number of chunks written.
fn emit_chunks<E: Send>(
    g: Gathered,
    options: &otlp_to_sentry::ChunkOptions,
    write: &mut (dyn FnMut(&ProfileChunk) -> std::result::Result<(), E> + Send),
) -> std::result::Result<(u8, usize), E> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<ProfileChunk>(PIPELINE);
    // Chunks freed on the writer thread would wait there for this thread's allocator to
    // collect them; freed here, their memory serves the next chunks.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<ProfileChunk>();
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || {
            let mut written = 0usize;
            for chunk in rx.iter() {
                // On an error the receiver goes away: later chunks are only reported.
                write(&chunk)?;
                written += 1;
                drop(done_tx.send(chunk));
            }
            Ok(written)
        });
        let code = make_chunks(g, options, &mut |chunk| {
            done_rx.try_iter().for_each(drop);
            drop(tx.send(chunk));
        });
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        Ok((code, written))
    })
}

/// Makes the chunks [`emit_chunks`] writes, handing each to `emit`; reports on stderr. Returns
/// the exit code.
fn make_chunks(
    g: Gathered,
    options: &otlp_to_sentry::ChunkOptions,
    emit: &mut dyn FnMut(ProfileChunk),
) -> u8 {
    let Gathered { otlp, sentry, .. } = g;
    let mut code = EXIT_OK;
    // Strict out for chunks passed through as they came, too: the validator's errors are
    // reported, the chunk not written.
    for chunk in sentry.chunks {
        match otlp_to_sentry::blocking_error(&chunk, options) {
            Some(f) => {
                eprintln!("chunk {}: rejected: invalid chunk: {f}", chunk.chunk_id);
                code = EXIT_REJECTED;
            }
            None => emit(chunk),
        }
    }
    for (name, req) in otlp {
        let t = otlp_to_sentry::to_chunks_streamed(
            req.dictionary.as_ref(),
            &req.resource_profiles,
            options,
            &mut |chunk, _links| emit(chunk),
        );
        drop(req);
        for r in &t.rejected {
            eprintln!("{name}: {}: rejected: {}", r.path, r.error);
            code = EXIT_REJECTED;
        }
        // Strict out: the translator removed chunks that fail the chunk validator.
        for c in &t.invalid_chunks {
            eprintln!(
                "{name}: chunk {}: rejected: invalid chunk ({} samples not written): {}",
                c.chunk_id, c.samples, c.finding
            );
            code = EXIT_REJECTED;
        }
        let s = &t.stats;
        if s.profiles_skipped_non_cpu > 0 {
            let types: Vec<String> = t
                .skipped_sample_types
                .iter()
                .map(|(label, n)| format!("{label} ({n})"))
                .collect();
            eprintln!(
                "{name}: skipped {} profile(s) that are not CPU/wall samples, by sample_type: {} (see --cpu-sample-type)",
                s.profiles_skipped_non_cpu,
                types.join(", ")
            );
        }
        if s.profiles_skipped_sibling > 0 {
            eprintln!(
                "{name}: skipped {} profile(s) that repeat another profile's samples under another sample type (one recording, translated once)",
                s.profiles_skipped_sibling
            );
        }
        if s.samples_grouped > 0 {
            eprintln!(
                "{name}: grouped {} sample(s) of {} thread(s) with fewer than 2 samples in their chunk into {} group thread(s)",
                s.samples_grouped, s.threads_grouped, s.thread_groups
            );
        }
        if s.samples_dropped_sparse > 0 {
            eprintln!(
                "{name}: dropped {} sample(s) of {} thread(s) with fewer than 2 samples in their chunk (Relay would drop them)",
                s.samples_dropped_sparse,
                s.sparse_threads.saturating_sub(s.threads_grouped)
            );
        }
    }
    code
}

fn to_otlp(args: &Args, g: Gathered) -> Result<u8> {
    let mut code = EXIT_OK;
    let sentry =
        !(g.sentry.chunks.is_empty() && g.sentry.v1_profiles.is_empty() && g.ndjson.is_empty());
    let request = if !sentry {
        match g.otlp.len() {
            1 => g
                .otlp
                .into_iter()
                .next()
                .map(|(_, r)| r)
                .unwrap_or_default(),
            0 => bail!("no profiles in the inputs"),
            _ => bail!("OTLP -> OTLP conversion takes exactly one input"),
        }
    } else {
        if !g.otlp.is_empty() {
            bail!("mixing OTLP and Sentry inputs is not supported for --to otlp");
        }
        let t = sentry_to_otlp_request(g)?;
        for r in &t.rejected {
            eprintln!("{}: rejected: {}", r.item, r.error);
            code = EXIT_REJECTED;
        }
        t.request
    };
    let bytes = match args.to {
        OutputFormat::OtlpJson => otlp_json::encode_request(&request),
        _ => request.encode_to_vec(),
    };
    write_output(args.output, &bytes)?;
    Ok(code)
}

/// The OTLP request of the gathered Sentry inputs: their chunks in input order, then their V1
/// profiles, linked through all their transactions. The chunks of NDJSON inputs are parsed on
/// other threads as the translation takes them (see [`parse_ndjson`]), so parsing, the
/// largest part of the work, overlaps translating and the chunks are never all in memory.
fn sentry_to_otlp_request(g: Gathered) -> Result<sentry_to_otlp::OtlpTranslation> {
    let Gathered { sentry, ndjson, .. } = g;
    let links = TransactionLinks::new(&sentry.transactions);
    let options = sentry_to_otlp::OtlpOptions::default();
    let mut b = sentry_to_otlp::OtlpBuilder::new(&links, &options);
    let mut done = 0;
    for d in ndjson {
        sentry.chunks[done..d.after]
            .iter()
            .for_each(|c| b.add_chunk(c));
        done = d.after;
        parse_ndjson(&d.bytes, &mut |c| b.add_chunk(c))
            .with_context(|| format!("{}: rejected", d.name))?;
    }
    sentry.chunks[done..].iter().for_each(|c| b.add_chunk(c));
    sentry.v1_profiles.iter().for_each(|v| b.add_v1(v));
    Ok(b.finish())
}

/// Chunks parsed ahead of the translation, at most, per parsing thread.
const PARSED_AHEAD: usize = 2;

/// Hands the chunks of NDJSON `bytes` to `take` in line order, parsed by up to 4 threads
/// (line `i` by thread `i % threads`). Stops at the first line that is not a chunk and returns
/// its error (the same as [`SentryParts::read`]'s).
fn parse_ndjson(
    bytes: &[u8],
    take: &mut dyn FnMut(&ProfileChunk),
) -> std::result::Result<(), InputError> {
    use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    std::thread::scope(|scope| {
        let mut parsed: Vec<Receiver<std::result::Result<ProfileChunk, InputError>>> = Vec::new();
        let mut used: Vec<std::sync::mpsc::Sender<ProfileChunk>> = Vec::new();
        for k in 0..threads {
            let (tx, rx): (SyncSender<_>, _) = sync_channel(PARSED_AHEAD);
            // Taken chunks go back to be freed by the thread that made them, whose
            // allocator then reuses their memory for the next ones.
            let (used_tx, used_rx) = channel::<ProfileChunk>();
            parsed.push(rx);
            used.push(used_tx);
            scope.spawn(move || {
                let lines = ndjson_lines(bytes).skip(k).step_by(threads);
                for (line, text) in lines {
                    used_rx.try_iter().for_each(drop);
                    let chunk = ndjson_chunk(line, text);
                    let failed = chunk.is_err();
                    if tx.send(chunk).is_err() || failed {
                        return;
                    }
                }
            });
        }
        // Round robin: thread `i % threads` has line `i`; the first to run out had the last.
        for i in 0.. {
            let k = i % threads;
            let Ok(chunk) = parsed[k].recv() else {
                return Ok(());
            };
            let chunk = chunk?;
            take(&chunk);
            drop(used[k].send(chunk));
        }
        Ok(())
    })
}
