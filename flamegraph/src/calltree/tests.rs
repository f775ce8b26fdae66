use super::*;
use profilink_proto::sentry::Sample;

fn frame(name: &str, module: &str, in_app: bool) -> Frame {
    Frame {
        function: Some(name.into()),
        module: Some(module.into()),
        in_app: Some(in_app),
        ..Default::default()
    }
}

/// Spec example shape: handle_request → do_work → loads (system), 30 samples with loads,
/// 10 without, 100 ms apart, plus a closing sample.
fn example_chunk() -> ProfileChunk {
    let mut c = ProfileChunk {
        platform: "python".into(),
        chunk_id: "c".into(),
        ..Default::default()
    };
    c.profile.frames = vec![
        frame("handle_request", "app.web", true).into(),
        frame("do_work", "app.worker", true).into(),
        frame("loads", "json", false).into(),
    ];
    c.profile.stacks = vec![vec![2, 1, 0], vec![1, 0]];
    for i in 0..41 {
        c.profile.samples.push(Sample {
            timestamp: 1000.0 + f64::from(i) * 0.1,
            stack_id: if i < 30 { 0 } else { 1 },
            thread_id: "1".into(),
        });
    }
    c
}

#[test]
fn builds_runs_and_merges() {
    let agg = build(&example_chunk()).unwrap();
    assert_eq!(agg.threads.len(), 1);
    let t = &agg.threads[0];
    assert_eq!(t.nodes.len(), 3);
    let names: Vec<_> = t
        .nodes
        .iter()
        .map(|n| agg.frames[n.frame as usize].name.as_str())
        .collect();
    assert_eq!(names, ["handle_request", "do_work", "loads"]);
    assert_eq!(t.nodes[0].sample_count, 40);
    assert_eq!(t.nodes[2].sample_count, 30);
    assert_eq!(t.nodes[0].occurrence, 1);
    let d = |s: f64, e: f64| to_ns(e) - to_ns(s);
    assert_eq!(t.nodes[0].duration_ns, d(1000.0, 1000.0 + 40.0 * 0.1));
    assert_eq!(t.nodes[2].duration_ns, d(1000.0, 1000.0 + 30.0 * 0.1));
    assert!(t.nodes[1].ends_samples && t.nodes[2].ends_samples && !t.nodes[0].ends_samples);
    assert_eq!(t.nodes[0].self_time_ns, 0);
    assert_eq!(
        t.nodes[1].self_time_ns,
        t.nodes[1].duration_ns - t.nodes[2].duration_ns
    );
    // Metrics: do_work is the only in-app function below depth 0 with self time.
    assert_eq!(t.functions.len(), 1);
    let f = &t.functions[0];
    assert_eq!(agg.frames[f.frame as usize].name, "do_work");
    // Application-aware self time: system children do not reduce it.
    assert_eq!(f.sum_self_time_ns, t.nodes[1].duration_ns);
    assert_eq!(ChunkAgg::decode(&agg.encode()), Some(agg));
}

#[test]
fn interrupted_runs_are_separate_occurrences() {
    let mut c = example_chunk();
    // a b a pattern for the leaf: loads, (no loads), loads.
    c.profile.samples.clear();
    for (i, sid) in [0, 1, 0, 0].iter().enumerate() {
        c.profile.samples.push(Sample {
            timestamp: 10.0 + i as f64,
            stack_id: *sid,
            thread_id: "7".into(),
        });
    }
    let agg = build(&c).unwrap();
    let t = &agg.threads[0];
    let loads = t
        .nodes
        .iter()
        .find(|n| agg.frames[n.frame as usize].name == "loads")
        .unwrap();
    assert_eq!(loads.occurrence, 2);
    assert_eq!(loads.sample_count, 2);
    assert_eq!(loads.durations_len, 2);
    assert_eq!(t.nodes[0].occurrence, 1);
    assert_eq!(t.nodes[0].sample_count, 3);
}

#[test]
fn invalid_indices_are_rejected() {
    let mut c = example_chunk();
    c.profile.samples[3].stack_id = 9;
    assert!(matches!(
        build(&c),
        Err(CallTreeError::InvalidStackId { .. })
    ));
    let mut c = example_chunk();
    c.profile.stacks.push(vec![5]);
    assert!(matches!(
        build(&c),
        Err(CallTreeError::InvalidFrameId { .. })
    ));
    assert_eq!(
        build(&ProfileChunk::default()),
        Err(CallTreeError::NoSamples)
    );
}

#[test]
fn decode_rejects_garbage() {
    assert_eq!(ChunkAgg::decode(&[0xff, 0xff, 0xff]), None);
    let mut bytes = build(&example_chunk()).unwrap().encode();
    bytes.push(0);
    assert_eq!(ChunkAgg::decode(&bytes), None);
}
