// Node wall profile for tests/fixtures/pprof/node-wall.pb.gz: `npm install @datadog/pprof` (5.20.0), then `node node-wall.js OUT.pb.gz`.
// Records a wall profile of a busy loop with @datadog/pprof and writes it gzipped.
const pprof = require('@datadog/pprof');
const fs = require('fs');
function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
function busy(ms) { const end = Date.now() + ms; let x = 0; while (Date.now() < end) { x += fib(18); } return x; }
function idle(ms) { return new Promise(r => setTimeout(r, ms)); }
async function main() {
  pprof.time.start({ durationMillis: 3000, intervalMicros: 10000 });
  for (let i = 0; i < 10; i++) { busy(150); await idle(50); }
  const profile = pprof.time.stop();
  const buf = await pprof.encode(profile);
  fs.writeFileSync(process.argv[2], buf);
}
main();
