//! The command line (see the options in `main.rs`'s docs).

use std::path::PathBuf;

/// What to run.
#[derive(Clone)]
pub struct Args {
    pub clients: usize,
    pub seconds: u64,
    pub sessions: usize,
    pub binary: PathBuf,
    pub overload: bool,
    pub fsync: bool,
    pub budget_mib: usize,
    pub sample_rate: f64,
    pub compression: String,
    pub target: Option<String>,
    /// `--symbolize`: the three-phase symbolization comparison (see `symbolize`).
    pub symbolize: bool,
    /// `--new-addresses P`: with `--symbolize`, the percentage of each request's native
    /// locations whose address is new (the others keep their address of the client's first
    /// request).
    pub new_addresses: u64,
    /// `--repeat N`: with `--symbolize`, run the three phases N times; with `--against`, run
    /// every binary N times, interleaved (medians reported).
    pub repeat: usize,
    /// `--against PATH` (repeatable): other binaries measured under the same load, interleaved
    /// with `--binary` (see `compare`).
    pub against: Vec<PathBuf>,
    /// `--pprof DIR`: profilink writes a CPU profile of each run into DIR.
    pub pprof: Option<PathBuf>,
    /// `--kafka`: the Kafka consumer against the OTLP/gRPC receiver (`kafka.rs`).
    pub kafka: bool,
    /// `--messages N`: requests in `--kafka` mode.
    pub messages: usize,
    /// `--floor PATH`: with `--against`, the independent floor program (`floor --service`,
    /// outside this repository) run before every binary's run, so each run's CPU per
    /// observation is held against a floor measured in the same conditions (see `compare`).
    pub floor: Option<PathBuf>,
}

/// What `--help` prints (the module docs of `main.rs` say more).
const USAGE: &str = "\
usage: load [OPTIONS]   (throughput of a fresh profilink under OTLP/gRPC load)
  --clients N          concurrent clients (4)
  --seconds T          length of the measured load (20)
  --sessions K         resource copies per request (16)
  --binary PATH        the profilink to measure (beside this example's directory)
  --against PATH       also measure this binary, interleaved (repeatable; --repeat N rounds)
  --overload           10x the clients against a slow Sentry stand-in
  --no-fsync           the queue without fsync
  --budget-mib M       memory for pre-built requests (1024)
  --sample-rate R      profile_sampling rate (1.0; 0 measures receiving and translating)
  --compression C      the exporter's compression: gzip, zstd or none (gzip)
  --target ADDR        send to a running OTLP/gRPC endpoint instead
  --pprof DIR          write profilink's CPU profile of each run into DIR
  --symbolize          the symbolize processor off, cold and warm (--repeat N, --new-addresses P)
  --kafka              the kafka receiver against OTLP/gRPC (--messages N, 3000)
  --floor PATH         with --against: run `PATH --service` on the fixture before every run
                       and report CPU per observation as a ratio to it
";

/// Reads the flags; exits with the usage on unknown ones, panics on bad values.
pub fn args() -> Args {
    let mut a = Args {
        clients: 4,
        seconds: 20,
        sessions: 16,
        binary: std::env::current_exe()
            .ok()
            .and_then(|p| p.parent()?.parent().map(|d| d.join("profilink")))
            .unwrap_or_else(|| PathBuf::from("target/release/profilink")),
        overload: false,
        fsync: true,
        budget_mib: 1024,
        sample_rate: 1.0,
        compression: "gzip".into(),
        target: None,
        symbolize: false,
        new_addresses: 50,
        repeat: 1,
        against: Vec::new(),
        pprof: None,
        kafka: false,
        messages: 3000,
        floor: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().expect("flag value");
        match flag.as_str() {
            "--clients" => a.clients = val().parse().expect("--clients N"),
            "--seconds" => a.seconds = val().parse().expect("--seconds T"),
            "--sessions" => a.sessions = val().parse().expect("--sessions K"),
            "--binary" => a.binary = PathBuf::from(val()),
            "--against" => a.against.push(PathBuf::from(val())),
            "--budget-mib" => a.budget_mib = val().parse().expect("--budget-mib M"),
            "--overload" => a.overload = true,
            "--no-fsync" => a.fsync = false,
            "--sample-rate" => a.sample_rate = val().parse().expect("--sample-rate R"),
            "--compression" => a.compression = val(),
            "--target" => a.target = Some(val()),
            "--symbolize" => a.symbolize = true,
            "--repeat" => a.repeat = val().parse().expect("--repeat N"),
            "--new-addresses" => a.new_addresses = val().parse().expect("--new-addresses P"),
            "--pprof" => a.pprof = Some(PathBuf::from(val())),
            "--kafka" => a.kafka = true,
            "--messages" => a.messages = val().parse().expect("--messages N"),
            "--floor" => a.floor = Some(PathBuf::from(val())),
            "--help" | "-h" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => {
                eprint!("unknown flag {other}\n\n{USAGE}");
                std::process::exit(2);
            }
        }
    }
    if a.overload {
        a.clients *= 10;
    }
    a
}
