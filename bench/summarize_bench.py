#!/usr/bin/env python3
"""Median of medians over several `posenc bench --json` runs, as a Markdown table.

Usage: bench/summarize_bench.py run1.jsonl run2.jsonl run3.jsonl [--compact] [--targets] [--fused] [--honest]
For each case (op, dtype, layout, threads, cache) it prints the median over runs of the kernel's
median time, its GB/s, the roofline's GB/s and the fraction, with the range of the fraction over runs
(--compact: one row per case and thread count, warm and cold side by side, with the median of
`attainable`, min(1, threads x one core's cache-resident rate / roofline), where the runs report it;
--targets: then, per group of rows, how many medians meet issue 4's bar: fraction >= 0.85 for RoPE
prefill and the gather, >= 0.6 for decode; --fused: the fused RoPE + KV-cache rows only, one row per
case and cache type with fraction_all, speedup_vs_unfused and fraction_of_pattern on 1 and 2 threads,
and how many meet issue 17's bars, fraction_all >= 0.85 and speedup >= 1.6; --honest: the 1-D RoPE rows,
one row per case with cold and warm fraction_all on 1 and 2 threads, and per dtype how many cold rows
meet issue 17's bar, fraction_all >= 0.85). Rows a run marks
`"steady": false` (after three attempts, a median still over 2x its fastest run or a reference pass over
2x slower per byte than the kernel) are left out and named; without --fused the fused rows are left
out too (their cache types would merge).
"""
import json
import statistics
import sys


def main(argv):
    files = [a for a in argv if not a.startswith('--')]
    rows, table = {}, []
    order = []
    unsteady = []
    for f in files:
        for line in open(f):
            line = line.strip()
            if not line.startswith('{'):
                continue
            r = json.loads(line)
            if r.get('steady', True) is False:
                unsteady.append(f"{f}: {r['op']} {r['dtype']} {r.get('cache_type', r['layout'])} "
                                f"{r['cache']} {r['threads']}T")
                continue
            if r['op'] == 'rope_table_build':
                table.append(r)
                continue
            if ('--fused' in argv) != bool(r.get('fused')):
                continue
            key = (r['op'], r['dtype'], r.get('cache_type', r['layout']), r['threads'], r.get('cache', 'warm'))
            if key not in rows:
                order.append(key)
            rows.setdefault(key, []).append(r)
    for u in unsteady:
        print(f"left out, not steady: {u}", file=sys.stderr)
    if '--fused' in argv:
        fused(rows, order)
        return
    if '--honest' in argv:
        honest(rows, order)
        return
    if '--compact' in argv:  # one row per case and thread count, warm and cold side by side
        def cell(rs):
            if not rs:
                return '- | - | - | -'
            med = lambda k: statistics.median(x[k] for x in rs)
            fr = [x['fraction'] for x in rs]
            att = f"{med('attainable'):.2f}" if all('attainable' in x for x in rs) else '-'
            return (f"{med('median_ms'):.3f} | {med('gbps'):.1f} / {med('roofline_gbps'):.1f} | "
                    f"**{statistics.median(fr):.2f}** ({min(fr):.2f}-{max(fr):.2f}) | {att}")
        print('| op | dtype | layout | thr | warm ms | warm GB/s / roof | warm fraction (range) | warm attain | '
              'cold ms | cold GB/s / roof | cold fraction (range) | cold attain |')
        print('|---|---|---|---|---|---|---|---|---|---|---|---|')
        seen = []
        for key in order:
            if key[:4] in seen:
                continue
            seen.append(key[:4])
            w, c = rows.get(key[:4] + ('warm',), []), rows.get(key[:4] + ('cold',), [])
            roof = (w or c)[0]['roofline']
            print(f"| {key[0]} ({roof}) | {key[1]} | {key[2]} | {key[3]} | {cell(w)} | {cell(c)} |")
        order = []
    else:
        print('| op | dtype | layout | threads | cache | median ms | GB/s | roofline GB/s | fraction | range over runs |')
        print('|---|---|---|---|---|---|---|---|---|---|')
    for key in order:
        rs = rows[key]
        med = lambda k: statistics.median(x[k] for x in rs)
        fr = [x['fraction'] for x in rs]
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | {med('median_ms'):.3f} | {med('gbps'):.1f} | "
              f"{med('roofline_gbps'):.1f} ({rs[0]['roofline']}) | {statistics.median(fr):.2f} | {min(fr):.2f}-{max(fr):.2f} |")
    if '--targets' in argv:
        targets(rows)
    if table:
        ratios = [t['exact_over_reference'] for t in table]
        print()
        print(f"rope_table_build [32768, 64]: reference {statistics.median(t['reference_median_ms'] for t in table):.1f} ms, "
              f"exact {statistics.median(t['exact_median_ms'] for t in table):.1f} ms, exact/reference median "
              f"{statistics.median(ratios):.2f} (runs: {', '.join(f'{x:.2f}' for x in ratios)})")


def fused(rows, order):
    """Fused rows: per case and cache type, cold then warm, 1 and 2 threads side by side."""
    med = lambda rs, k: statistics.median(x[k] for x in rs)
    cases = []
    for key in order:
        if key[:3] not in cases:
            cases.append(key[:3])
    met_fa = met_su = total = 0
    for cache in ('cold', 'warm'):
        print()
        print(f'| case ({cache}) | ms 1T | fraction_all 1T | speedup 1T | of_pattern 1T | '
              f'ms 2T | fraction_all 2T | speedup 2T | of_pattern 2T |')
        print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
        for op, dtype, ct in cases:
            cells = []
            for t in (1, 2):
                rs = rows.get((op, dtype, ct, t, cache), [])
                if not rs:
                    cells.append('- | - | - | -')
                    continue
                fa, su = med(rs, 'fraction_all'), med(rs, 'speedup_vs_unfused')
                if cache == 'cold':
                    total += 1
                    met_fa += fa >= 0.85
                    met_su += su >= 1.6
                pat = f"{med(rs, 'fraction_of_pattern'):.2f}" if all('fraction_of_pattern' in x for x in rs) else '-'
                cells.append(f"{med(rs, 'median_ms'):.3f} | {fa:.2f} | {su:.2f} | {pat}")
            print(f"| {op.replace('fused_', '')} {dtype} -> {ct} | {' | '.join(cells)} |")
    print()
    print(f'cold rows with fraction_all >= 0.85: {met_fa} of {total}; speedup_vs_unfused >= 1.6: {met_su} of {total}')


def honest(rows, order):
    """1-D RoPE rows (rope_prefill_*, rope_decode): cold and warm fraction_all, 1 and 2 threads, and per
    dtype the cold rows at fraction_all >= 0.85 (issue 17's bar)."""
    cases = []
    for key in order:
        if key[0].startswith(('rope_prefill', 'rope_decode')) and key[:3] not in cases:
            cases.append(key[:3])
    met, total = {}, {}
    print('| op | dtype | layout | cold 1T | cold 2T | warm 1T | warm 2T |')
    print('|---|---|---|---:|---:|---:|---:|')
    for op, dtype, layout in cases:
        cells = []
        for cache in ('cold', 'warm'):
            for t in (1, 2):
                rs = rows.get((op, dtype, layout, t, cache), [])
                if not rs or not all('fraction_all' in x for x in rs):
                    cells.append('-')
                    continue
                fa = statistics.median(x['fraction_all'] for x in rs)
                if cache == 'cold':
                    total[dtype] = total.get(dtype, 0) + 1
                    met[dtype] = met.get(dtype, 0) + (fa >= 0.85)
                cells.append(f'{fa:.2f}')
        print(f"| {op} | {dtype} | {layout} | {' | '.join(cells)} |")
    print()
    print('cold rows with fraction_all >= 0.85: ' +
          ', '.join(f'{d} {met[d]} of {total[d]}' for d in total) +
          f'; all {sum(met.values())} of {sum(total.values())}')


def targets(rows):
    """Rows (case, threads, cache) whose median fraction meets issue 4's bar, per group."""
    groups, order = {}, []
    for (op, dtype, layout, threads, cache), rs in rows.items():
        inplace = rs[0].get('inplace', True)
        if op.startswith('gather'):
            group, bar = f'{op} {dtype}', 0.85
        elif op == 'rope_decode':
            group, bar = f'decode {dtype} {cache}', 0.6
        elif op.startswith('rope_prefill'):
            kind = 'keys' if op == 'rope_prefill_k' else 'q, q+k'
            group, bar = (f'prefill out of place {dtype}' if not inplace else f'prefill in place {dtype} {kind}'), 0.85
        else:
            continue
        if group not in groups:
            order.append(group)
            groups[group] = []
        groups[group].append((statistics.median(x['fraction'] for x in rs), bar))
    print()
    print('| group | met / rows | fractions (min-max) |')
    print('|---|---|---|')
    met = total = 0
    for g in order:
        fs = groups[g]
        m = sum(f >= bar for f, bar in fs)
        met += m
        total += len(fs)
        print(f"| {g} | {m} / {len(fs)} | {min(f for f, _ in fs):.2f}-{max(f for f, _ in fs):.2f} |")
    print(f"| all | {met} / {total} | |")


if __name__ == '__main__':
    main(sys.argv[1:])
