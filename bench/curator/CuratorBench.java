// CuratorBench: Curator's InterProcessMutex, driven by `lockwarden bench` so that it is measured
// on the same ZooKeeper, in the same run, in batches interleaved with lockwarden and the floor.
//
// Run:   java -cp DIR:CURATOR_CLASSPATH CuratorBench --connect HOST:PORT
// Then one command per line on stdin; each answer is one JSON line on stdout (logs go to stderr):
//   warmup N SECONDS             >= N acquire+release cycles and >= SECONDS of them (JIT, caches)
//   uncontended N                N acquire+release cycles on one lock, one client, sequential;
//                                answers every cycle's duration in nanoseconds
//   timed contended|parallel C WARM_S SECONDS
//                                C clients (one CuratorFramework connection and one thread each)
//                                loop acquire+release on one lock (contended) or their own
//                                (parallel) for WARM_S + SECONDS; counts the cycles whose acquire
//                                completed inside the SECONDS window
//   quit
// Every lock path is under /lockwarden-bench-curator-<random>, so runs never meet.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class CuratorBench {
    private static String connect = "127.0.0.1:2181";
    private static final String ROOT =
        "/lockwarden-bench-curator-" + Long.toHexString(Double.doubleToLongBits(Math.random()) ^ System.nanoTime());

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--connect") && i + 1 < args.length) {
                connect = args[++i];
            } else {
                throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        CuratorFramework single = open();
        InterProcessMutex mutex = new InterProcessMutex(single, ROOT + "/uncontended");
        System.out.println("{\"op\":\"ready\",\"root\":\"" + ROOT + "\"}");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            String answer;
            try {
                switch (w[0]) {
                    case "warmup":
                        answer = warmup(mutex, Integer.parseInt(w[1]), Double.parseDouble(w[2]));
                        break;
                    case "uncontended":
                        answer = uncontended(mutex, Integer.parseInt(w[1]));
                        break;
                    case "timed":
                        answer = timed(w[1].equals("contended"), Integer.parseInt(w[2]),
                            Double.parseDouble(w[3]), Double.parseDouble(w[4]));
                        break;
                    case "quit":
                        single.close();
                        System.exit(0);
                        return;
                    default:
                        answer = error("unknown command " + w[0]);
                }
            } catch (Exception e) {
                answer = error(e.toString());
            }
            System.out.println(answer);
            System.out.flush();
        }
        single.close();
        System.exit(0);
    }

    private static String error(String message) {
        return "{\"op\":\"error\",\"message\":\"" + message.replace("\\", "\\\\").replace("\"", "'") + "\"}";
    }

    private static CuratorFramework open() throws InterruptedException {
        CuratorFramework c = CuratorFrameworkFactory.newClient(connect, 30_000, 15_000,
            new ExponentialBackoffRetry(100, 3));
        c.start();
        if (!c.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no ZooKeeper connection to " + connect);
        }
        return c;
    }

    private static void cycle(InterProcessMutex mutex) throws Exception {
        mutex.acquire();
        mutex.release();
    }

    private static String warmup(InterProcessMutex mutex, int n, double seconds) throws Exception {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        int done = 0;
        while (done < n || System.nanoTime() < end) {
            cycle(mutex);
            done++;
        }
        return "{\"op\":\"warmup\",\"cycles\":" + done + "}";
    }

    private static String uncontended(InterProcessMutex mutex, int n) throws Exception {
        StringBuilder b = new StringBuilder("{\"op\":\"uncontended\",\"samples_ns\":[");
        for (int i = 0; i < n; i++) {
            long started = System.nanoTime();
            cycle(mutex);
            long took = System.nanoTime() - started;
            if (i > 0) b.append(',');
            b.append(took);
        }
        return b.append("]}").toString();
    }

    private static String timed(boolean contended, int clients, double warmS, double seconds) throws Exception {
        String base = ROOT + (contended ? "/contended-" : "/parallel-") + clients + "-" + System.nanoTime();
        List<CuratorFramework> connections = new ArrayList<>();
        List<InterProcessMutex> mutexes = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            CuratorFramework c = open();
            connections.add(c);
            mutexes.add(new InterProcessMutex(c, contended ? base : base + "/" + i));
        }
        long windowStart = System.nanoTime() + (long) (warmS * 1e9) + 200_000_000L;
        long windowEnd = windowStart + (long) (seconds * 1e9);
        long[][] waits = new long[clients][];
        int[] counts = new int[clients];
        // Every cycle, warm-up and tail included: the bench divides ZooKeeper's counters by it.
        int[] cycles = new int[clients];
        AtomicReference<Throwable> failure = new AtomicReference<>();
        CountDownLatch done = new CountDownLatch(clients);
        for (int i = 0; i < clients; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                long[] mine = new long[4096];
                int k = 0;
                try {
                    InterProcessMutex m = mutexes.get(id);
                    while (true) {
                        long started = System.nanoTime();
                        if (started >= windowEnd) break;
                        m.acquire();
                        long acquired = System.nanoTime();
                        m.release();
                        cycles[id]++;
                        if (acquired >= windowStart && acquired < windowEnd) {
                            if (k == mine.length) mine = Arrays.copyOf(mine, k * 2);
                            mine[k++] = acquired - started;
                        }
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                } finally {
                    waits[id] = Arrays.copyOf(mine, k);
                    counts[id] = k;
                    done.countDown();
                }
            }, "curator-client-" + i);
            t.setDaemon(true);
            t.start();
        }
        done.await();
        for (CuratorFramework c : connections) c.close();
        if (failure.get() != null) return error("a client failed: " + failure.get());
        int total = 0, least = Integer.MAX_VALUE, most = 0, allCycles = 0;
        for (int c : cycles) allCycles += c;
        for (int c : counts) {
            total += c;
            least = Math.min(least, c);
            most = Math.max(most, c);
        }
        long[] all = new long[total];
        int at = 0;
        for (long[] w : waits) {
            System.arraycopy(w, 0, all, at, w.length);
            at += w.length;
        }
        Arrays.sort(all);
        return String.format(Locale.ROOT,
            "{\"op\":\"timed\",\"mode\":\"%s\",\"clients\":%d,\"operations\":%d,\"per_second\":%.2f," +
            "\"p50_us\":%.1f,\"p99_us\":%.1f,\"min_per_client\":%d,\"max_per_client\":%d,\"cycles\":%d}",
            contended ? "contended" : "parallel", clients, total, total / seconds,
            percentile(all, 50), percentile(all, 99), least, most, allCycles);
    }

    /** Nearest rank, in microseconds; as the Rust bench's. */
    private static double percentile(long[] sorted, double p) {
        if (sorted.length == 0) return 0;
        int rank = (int) Math.ceil(p / 100.0 * sorted.length);
        rank = Math.max(1, Math.min(sorted.length, rank));
        return sorted[rank - 1] / 1000.0;
    }
}
