#!/usr/bin/env python3
"""Writes the experiment files of a full mesh of tests between sites, for `flowlab run`.

    contrib/k8s/mesh.py SITES OUTDIR [--shards N] [--duration 3s] [--rate 1M] [--echo-every 4]

SITES has one site a line, `NAME ADDRESS` (the agent, HOST[:PORT]); `#` starts a comment.
Every ordered pair of sites gets one test, in rounds: in each round every site is paired with
one other (the circle method of a round-robin tournament, a site sitting out when their number
is odd) and each pair tests both ways at once, so an agent serves one test and runs one at a
time. N sites take N-1 rounds (N when odd). The rounds are split over N files
(OUTDIR/mesh-00.toml, ...), since one experiment holds at most 1000 flows; run them one after
another (docs/fleet.md works out the timing for 100 sites).
"""

import argparse
import pathlib
import sys


def read_sites(path):
    sites = []
    for number, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 2:
            sys.exit(f"{path}:{number}: expected NAME ADDRESS, got {line!r}")
        sites.append((fields[0], fields[1]))
    names = [n for n, _ in sites]
    if len(set(names)) != len(names):
        sys.exit(f"{path}: a site is named twice")
    if len(sites) < 2:
        sys.exit(f"{path}: a mesh needs at least two sites")
    return sites


def rounds(names):
    """The circle method: one fixed seat, the others rotate; None is a bye."""
    seats = list(names) + ([None] if len(names) % 2 else [])
    half = len(seats) // 2
    for _ in range(len(seats) - 1):
        pairs = zip(seats[:half], reversed(seats[half:]))
        yield [(a, b) for a, b in pairs if a is not None and b is not None]
        seats = [seats[0], seats[-1]] + seats[1:-1]


def shard_text(sites, numbered_rounds, args):
    out = [
        "# Written by contrib/k8s/mesh.py: one round of the mesh per step.",
        "[experiment]",
        f'name = "mesh"',
        f'description = "full mesh, rounds {numbered_rounds[0][0]}..{numbered_rounds[-1][0]}"',
        "",
    ]
    for name, address in sites:
        out += ["[[host]]", f'name = "{name}"', f'address = "{address}"', ""]
    blocks = []
    for number, pairs in numbered_rounds:
        flows = []
        for a, b in pairs:
            for src, dst in ((a, b), (b, a)):
                flow = f"{src}-{dst}"
                flows.append(flow)
                out += [
                    "[[flow]]",
                    f'name = "{flow}"',
                    f'from = "{src}"',
                    f'to = "{dst}"',
                    f'rate = "{args.rate}"',
                    f'duration = "{args.duration}"',
                    f"echo_every = {args.echo_every}",
                    "",
                ]
        blocks.append((f"round-{number:03}", flows))
    out += ["[plan]", "serial = [" + ", ".join(f'"{b}"' for b, _ in blocks) + "]", ""]
    for block, flows in blocks:
        out += ["[[plan.block]]", f'name = "{block}"']
        out += ["parallel = [" + ", ".join(f'"{f}"' for f in flows) + "]", ""]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("sites")
    p.add_argument("outdir")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--duration", default="3s")
    p.add_argument("--rate", default="1M")
    p.add_argument("--echo-every", type=int, default=4)
    args = p.parse_args()
    sites = read_sites(args.sites)
    all_rounds = list(enumerate(rounds([n for n, _ in sites])))
    if not 1 <= args.shards <= len(all_rounds):
        sys.exit(f"--shards must be 1..{len(all_rounds)} for {len(sites)} sites")
    outdir = pathlib.Path(args.outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    per = -(-len(all_rounds) // args.shards)
    for shard in range(args.shards):
        part = all_rounds[shard * per : (shard + 1) * per]
        if part:
            text = shard_text(sites, part, args)
            (outdir / f"mesh-{shard:02}.toml").write_text(text)


if __name__ == "__main__":
    main()
