// A few hot functions (leafA, leafB under middle under entry) kept busy until the process has
// used argv[2] seconds of CPU time (default 3) on them, so that a loaded machine only stretches
// the run. With argv[3] (a path), the work starts once that file exists: profilers attached by
// PID are all there before it, and each sees the whole of it.
const cpuBudgetUs = Number(process.argv[2] || 3) * 1e6;
const goFile = process.argv[3];
function leafA(n) { let s = 0; for (let i = 0; i < n; i++) s += Math.sqrt(i ^ s); return s; }
function leafB(n) { let s = 1; for (let i = 0; i < n; i++) s = (s * 31 + i) % 1000003; return s; }
function middle(n) { return leafA(n) + leafB(n); }
function entry() {
  const start = process.cpuUsage();
  let t = 0;
  for (;;) {
    for (let k = 0; k < 50; k++) t += middle(20000);
    const u = process.cpuUsage(start);
    if (u.user + u.system >= cpuBudgetUs) return t;
  }
}
function run() { console.log(entry() > 0 ? 'ok' : 'odd'); }
function whenGo() {
  if (require('fs').existsSync(goFile)) run();
  else setTimeout(whenGo, 20);
}
if (goFile) whenGo(); else run();
