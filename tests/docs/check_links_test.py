#!/usr/bin/env python3
"""tools/check_links.py on a small repository of its own: a tree whose links, anchors and paths all
resolve passes; a broken link, a broken anchor, a missing path in a code span and a missing path in
a command each fail with their page and line."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'check_links.py')

README = """# Tiny

Read [the guide](docs/guide.md), its [second part](docs/guide.md#the-ember-command-twice-1) and
[below](#what-is-here). The code: `src/policy.hpp`, `src/` and `src/policy.cpp:12`; built:
`build/bin/tiny` (ignored by git, not checked); not paths: `models/m/1`, `tests/<room>/`, `a.b`.

## What is here

```sh
src/run.sh --out x && printf 'a' > src/made.txt && cat src/made.txt
```
"""

GUIDE = """# Guide

## The `ember` command, twice!

## The `ember` command, twice!

Back to the [front page](../README.md#tiny); <!-- made-here: src/mine.yaml --> write `src/mine.yaml`.
"""


def tree(files):
    root = tempfile.mkdtemp(prefix='ember-links-')
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)) or root, exist_ok=True)
        with open(os.path.join(root, path), 'w') as f:
            f.write(text)
    return root


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    base = {'README.md': README, 'docs/guide.md': GUIDE, 'src/policy.hpp': '', 'src/policy.cpp': '',
            'src/run.sh': '', '.gitignore': '/build/\n/models/\n', 'build/keep': ''}
    rc, out = run(tree(base))
    assert rc == 0, out
    assert 'every link, anchor and repository path of 2 page(s) resolves' in out, out

    link = dict(base, **{'docs/guide.md': GUIDE + '\nSee [the design](design.md).\n'})
    rc, out = run(tree(link))
    assert rc == 1 and 'docs/guide.md:9: link `design.md` does not resolve' in out, out

    anchor = dict(base, **{'README.md': README.replace('#what-is-here', '#what-is-there')})
    rc, out = run(tree(anchor))
    assert rc == 1 and 'README.md:4: link `#what-is-there`: no heading `#what-is-there` in README.md' in out, out

    other = dict(base, **{'README.md': README.replace('twice-1', 'twice-2')})
    rc, out = run(tree(other))
    assert rc == 1 and 'no heading `#the-ember-command-twice-2` in docs/guide.md' in out, out

    path = dict(base, **{'README.md': README.replace('`src/policy.hpp`', '`src/polcy.hpp`')})
    rc, out = run(tree(path))
    assert rc == 1 and 'README.md:4: path `src/polcy.hpp` is not in the repository' in out, out

    command = dict(base, **{'README.md': README.replace('src/run.sh', 'src/walk.sh')})
    rc, out = run(tree(command))
    assert rc == 1 and 'README.md:10: path `src/walk.sh` is not in the repository' in out, out
    print('check_links_test: 6 cases pass')


if __name__ == '__main__':
    main()
