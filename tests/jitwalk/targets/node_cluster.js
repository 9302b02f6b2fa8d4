// A pre-forking server: the primary forks N workers (cluster module: fork + exec of node), each
// burns a fixed amount of CPU time in three JS functions, then exits; the primary exits after them.
const cluster = require('cluster');
const n = +(process.argv[2] || 16);
const cpuMs = +(process.argv[3] || 300);
if (cluster.isPrimary) {
  let left = n;
  for (let i = 0; i < n; i++) cluster.fork();
  cluster.on('exit', () => { if (--left === 0) process.exit(0); });
} else {
  function leaf(i) { return (i * 7) % 13; }
  function mid(i) { return leaf(i) + leaf(i + 1); }
  const start = process.cpuUsage();
  let s = 0;
  while (true) {
    for (let i = 0; i < 1e5; i++) s += mid(i);
    const u = process.cpuUsage(start);
    if ((u.user + u.system) / 1000 >= cpuMs) break;
  }
  process.exit(s === -1 ? 1 : 0);
}
