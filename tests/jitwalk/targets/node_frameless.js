// A frameless leaf under a JS caller (issue 31): with --no-opt, rt_leaf is baseline code whose
// only work, `%`, is V8's Modulus builtin, which sets up no frame. A frame-pointer walk from the
// builtin goes from it straight to rt_delta (rbp is still rt_leaf's); the return address at the
// stack pointer leads to rt_leaf. Runs until the process has used argv[2] ms of CPU time.
function rt_leaf(a, b) { return a % b; }
function rt_delta(n) { let s = 0; for (let i = 1; i < n; i++) s += rt_leaf(i, 7 + (i & 3)); return s; }
const cpuMs = +(process.argv[2] || 1500);
const start = process.cpuUsage();
let t = 0;
for (;;) {
  t += rt_delta(100000);
  const u = process.cpuUsage(start);
  if ((u.user + u.system) / 1000 >= cpuMs) break;
}
console.log(t > 0 ? 'ok' : 'odd');
