#!/usr/bin/env python3
"""Checks every #include of the source tree against the layer table of docs/architecture.md.

The table (the first Markdown table under the heading "## Layers") has one row per room: its folder
in backticks in the first column and, in the last column, the rooms it may include, in backticks
("—" for none, "anything" for no limit). A file belongs to the room of the longest folder that
holds it; an include of a file of the same room is always allowed. Includes of files outside the
repository (<...> or a path that does not exist here) are not checked.

Exit status 0 when every include is allowed; 1 with one line per violation otherwise; 2 when the
table cannot be read. Usage: tools/check_layers.py [REPO_ROOT]
"""
import os
import re
import sys

SOURCE_EXT = ('.hpp', '.cpp', '.h', '.cu', '.cuh')


def read_table(doc):
    lines = open(doc, encoding='utf-8').read().split('\n')
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == '## Layers')
    except StopIteration:
        sys.exit(f'{doc}: no "## Layers" heading')
    rows = []
    for l in lines[start + 1:]:
        if l.startswith('## '):
            break
        if not l.startswith('|') or set(l.replace('|', '').strip()) <= set('-: '):
            if rows and not l.startswith('|'):
                break
            continue
        cells = [c.strip() for c in l.strip().strip('|').split('|')]
        folder = re.findall(r'`([^`]+)`', cells[0])
        if not folder:
            continue  # the header row
        allowed = cells[-1]
        rooms = re.findall(r'`([^`]+)`', allowed)
        rows.append((folder[0].rstrip('/'), 'anything' if allowed.startswith('anything') else rooms))
    if not rows:
        sys.exit(f'{doc}: the layer table under "## Layers" has no rows')
    return dict((f, a if a == 'anything' else [r.rstrip('/') for r in a]) for f, a in rows)


def room_of(path, rooms):
    best = None
    for r in rooms:
        if path == r or path.startswith(r + '/'):
            if best is None or len(r) > len(best):
                best = r
    return best


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    table = read_table(os.path.join(root, 'docs', 'architecture.md'))
    bad, unplaced, checked = [], set(), 0
    for top in sorted(os.listdir(root)):
        if top.startswith('.') or top == 'build' or top.startswith('build') or not os.path.isdir(os.path.join(root, top)):
            continue
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith('.')]
            for name in filenames:
                if not name.endswith(SOURCE_EXT):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                here = room_of(path, table)
                if here is None:
                    unplaced.add(os.path.dirname(path))
                    continue
                allowed = table[here]
                for n, line in enumerate(open(os.path.join(root, path), encoding='utf-8', errors='replace'), 1):
                    m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                    if not m or not os.path.isfile(os.path.join(root, m.group(1))):
                        continue
                    checked += 1
                    there = room_of(m.group(1), table)
                    if allowed == 'anything' or there == here or there in allowed:
                        continue
                    bad.append(f'{path}:{n}: {here}/ may not include {m.group(1)} ({there or "no room"}/)')
    for d in sorted(unplaced):
        bad.append(f'{d}/: in no room of the layer table (docs/architecture.md, "## Layers")')
    for b in bad:
        print(b)
    if bad:
        print(f'check_layers: {len(bad)} include(s) against the layer table of docs/architecture.md')
        return 1
    print(f'check_layers: {checked} includes follow the layer table ({len(table)} rooms)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
