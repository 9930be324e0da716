#!/usr/bin/env python3
"""The write ceiling of lockwarden, as a model with its numbers (DESIGN.md, "Scale").

Every lockwarden state change is one ZooKeeper write, and every write of one ensemble goes
through its single leader and its log, so an ensemble has a write ceiling W (writes/s) that
more instances or more followers do not raise. The model charges each lock operation its
measured writes and answers two questions:

1. For a workload (acquire+release cycles/s, hand-offs/s, locks held with their lease and
   renewal interval), how busy is one ensemble, and how many ensembles (shards) does it need
   at a target utilisation?
2. What does a given number of shards and instances sustain, when instances are bounded by
   their CPU (pairs/s per instance, measured) and ensembles by W?

Reads are left out of the ceiling: they are answered by the server a session is connected to,
so they scale with the servers (and observers) of an ensemble, while writes do not.

The inputs default to figures measured on this project's 2-core machine (BENCHMARKS.md and
DESIGN.md); pass your own with the flags. Run: python3 bench/scale-model.py [--help]
"""

import argparse
import math

# Writes per operation, measured by `./scripts/bench` from ZooKeeper's own counters.
WRITES_PER_CYCLE = 2.00  # uncontended acquire+release: create/claim the record, free it
WRITES_PER_HANDOFF = 2.02  # a waiter's create + the hand-off multi (rare retries)
WRITES_PER_RENEWAL = 1.0  # one conditional setData


def ensemble_load(args, cycles, handoffs, held):
    """Writes/s a workload puts on ZooKeeper."""
    renewals = held * (1000.0 / args.renew_every_ms)
    return cycles * WRITES_PER_CYCLE + handoffs * WRITES_PER_HANDOFF + renewals * WRITES_PER_RENEWAL


def shards_needed(args, cycles, handoffs, held):
    load = ensemble_load(args, cycles, handoffs, held)
    return load, max(1, math.ceil(load / (args.ensemble_writes * args.utilisation)))


def ceiling(args, shards, instances):
    """Cycles/s that `shards` ensembles and `instances` instances sustain (no renewals)."""
    by_zookeeper = shards * args.ensemble_writes * args.utilisation / WRITES_PER_CYCLE
    by_instances = instances * args.instance_pairs
    return min(by_zookeeper, by_instances), ("ZooKeeper" if by_zookeeper <= by_instances else "instances")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ensemble-writes", type=float, default=6700.0,
                   help="one ensemble's write ceiling, writes/s (default: 2x the raw create+delete "
                        "pairs/s with 32 in flight that scripts/bench-scale measured on a 3-node "
                        "ensemble sharing 2 cores with everything else; a standalone server on the "
                        "same machine reached 2x 11,584)")
    p.add_argument("--instance-pairs", type=float, default=2235.0,
                   help="acquire+release pairs/s one instance serves (default: scripts/bench-scale, "
                        "1 instance, C=32, on the same 2 cores as the ensemble and the bench)")
    p.add_argument("--utilisation", type=float, default=0.7,
                   help="the share of the ceiling to plan for; queueing latency grows fast above it")
    p.add_argument("--renew-every-ms", type=float, default=10000.0,
                   help="renewal interval of held locks (the client renews every third of the lease)")
    p.add_argument("--single-lock-handoff-ms", type=float, default=1.2,
                   help="one hand-off's critical path on one lock (a fsync-bound multi plus the "
                        "HTTP answer); bounds one lock's hand-offs/s whatever the shards")
    args = p.parse_args()

    print(f"inputs: W = {args.ensemble_writes:.0f} writes/s per ensemble, "
          f"{args.instance_pairs:.0f} pairs/s per instance, plan at {args.utilisation:.0%}, "
          f"renewal every {args.renew_every_ms / 1000:.0f} s")
    print()
    print("1. Workloads and the ensembles they need")
    print("| workload | writes/s | ensembles |")
    print("|---|---:|---:|")
    workloads = [
        ("1,000 cycles/s, 10,000 locks held", 1000, 0, 10_000),
        ("5,000 cycles/s, 100,000 locks held", 5000, 0, 100_000),
        ("20,000 cycles/s, 100,000 locks held", 20_000, 0, 100_000),
        ("2,000 hand-offs/s over 200 hot locks, 1,000 held", 0, 2000, 1000),
        ("50,000 cycles/s, 1,000,000 locks held", 50_000, 0, 1_000_000),
    ]
    for name, cycles, handoffs, held in workloads:
        load, shards = shards_needed(args, cycles, handoffs, held)
        print(f"| {name} | {load:,.0f} | {shards} |")
    print()
    print("2. Ceiling (uncontended cycles/s) by shards and instances, and what bounds it")
    print("| ensembles | instances | cycles/s | bound by |")
    print("|---:|---:|---:|---|")
    for shards in (1, 2, 4, 8):
        for instances in (1, 3, 6, 12):
            rate, bound = ceiling(args, shards, instances)
            print(f"| {shards} | {instances} | {rate:,.0f} | {bound} |")
    print()
    one_lock = 1000.0 / args.single_lock_handoff_ms
    print(f"3. One lock: at most {one_lock:,.0f} hand-offs/s whatever the shards (its writes are "
          "serial on one ensemble); a hotter lock needs to be split by the application.")


if __name__ == "__main__":
    main()
