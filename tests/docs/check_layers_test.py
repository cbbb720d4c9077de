#!/usr/bin/env python3
"""tools/check_layers.py on a small tree of its own: an include down the table passes, one up the
table, one into a room the row does not name, and a folder in no room each fail with its line."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'check_layers.py')

TABLE = """# t

## Layers

| room | holds | may include |
|---|---|---|
| `base/` | b | — |
| `model/` | m | `base/` |
| `gpu/` | g | `base/` `model/` |
| `placement/` | p | `base/` `model/` |
| `tests/` | t | anything |
"""


def tree(files):
    root = tempfile.mkdtemp(prefix='ember-layers-')
    os.makedirs(os.path.join(root, 'docs'))
    with open(os.path.join(root, 'docs', 'architecture.md'), 'w') as f:
        f.write(TABLE)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), 'w') as f:
            f.write(text)
    return root


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    base = {'base/status.hpp': '#pragma once\n', 'model/model.hpp': '#include "base/status.hpp"\n',
            'placement/policy.hpp': '#include "model/model.hpp"\n',
            'gpu/device.hpp': '#include <vector>\n#include "model/model.hpp"\n#include "gpu/other.hpp"\n',
            'gpu/other.hpp': '#include "missing/file.hpp"\n',
            'tests/t.cpp': '#include "gpu/device.hpp"\n#include "placement/policy.hpp"\n'}
    rc, out = run(tree(base))
    assert rc == 0, out
    assert 'follow the layer table' in out, out

    up = dict(base, **{'model/model.cpp': '#include "model/model.hpp"\n#include "gpu/device.hpp"\n'})
    rc, out = run(tree(up))
    assert rc == 1 and 'model/model.cpp:2: model/ may not include gpu/device.hpp (gpu/)' in out, out

    sideways = dict(base, **{'gpu/split.cpp': '#include "placement/policy.hpp"\n'})
    rc, out = run(tree(sideways))
    assert rc == 1 and 'gpu/split.cpp:1: gpu/ may not include placement/policy.hpp (placement/)' in out, out

    roomless = dict(base, **{'sim/loop.cpp': '#include "base/status.hpp"\n'})
    rc, out = run(tree(roomless))
    assert rc == 1 and 'sim/: in no room of the layer table' in out, out
    print('check_layers_test: 4 cases pass')


if __name__ == '__main__':
    main()
