#!/usr/bin/env python3
"""tools/check_dashboard.py on a small tree of its own: a dashboard whose queries name registered
families (a histogram's _bucket with `le`, the gateway's `node`) passes; a metric nobody registers,
a counter asked for as a histogram, a selector on a label the metric lacks, a grouping on one no
metric of the query has, and a template variable's unknown label each fail with their place."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'check_dashboard.py')

SOURCE = '''
Instruments::Instruments()
    : requests_(registry_.counter("ember_requests_total", "Requests", {"model", "version", "outcome"})),
      duration_(registry_.histogram("ember_request_duration_seconds", "Time",
                                    {"model", "version"})),
      held_(registry_.gauge("ember_held_requests", "Held").with(std::vector<std::string>{})) {}
'''


def dashboard(exprs, variable='label_values(ember_requests_total, model)'):
    return {'title': 't', 'uid': 'u', 'panels': [
        {'id': i + 1, 'type': 'timeseries', 'title': f'p{i}', 'datasource': {'type': 'prometheus', 'uid': 'x'},
         'targets': [{'refId': 'A', 'expr': e}]} for i, e in enumerate(exprs)],
        'templating': {'list': [{'name': 'model', 'type': 'query', 'query': {'query': variable}}]}}


def run(root, dash):
    path = os.path.join(root, 'deploy', 'grafana', 'd.json')
    with open(path, 'w') as f:
        json.dump(dash, f)
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    root = tempfile.mkdtemp(prefix='ember-dashboard-')
    try:
        os.makedirs(os.path.join(root, 'actors'))
        os.makedirs(os.path.join(root, 'deploy', 'grafana'))
        with open(os.path.join(root, 'actors', 'instruments.cpp'), 'w') as f:
            f.write(SOURCE)
        good = ['sum by (model, outcome) (rate(ember_requests_total{model=~"$model",outcome!="success"}[5m]))',
                'histogram_quantile(0.99, sum by (model, le) (rate(ember_request_duration_seconds_bucket[5m])))',
                'sum by (node) (ember_held_requests)']
        rc, out = run(root, dashboard(good))
        assert rc == 0 and '4 queries' in out, out
        for exprs, variable, want in (
                (['rate(ember_requests_totl[5m])'], None, "ember_requests_totl is not a metric Ember exports"),
                (['rate(ember_requests_total_bucket[5m])'], None, 'ember_requests_total_bucket is not a metric'),
                (['ember_held_requests{model="x"}'], None, "ember_held_requests has no label 'model'"),
                (['sum by (tier) (ember_requests_total)'], None, "by (tier): no metric of the query has label 'tier'"),
                (good, 'label_values(ember_requests_total, tier)', "label_values: ember_requests_total has no label 'tier'")):
            rc, out = run(root, dashboard(exprs, variable or 'label_values(ember_requests_total, model)'))
            assert rc == 1 and want in out, (exprs, variable, out)
            print(f'ok: refused: {out.strip().splitlines()[0][-100:]}')
        rc, out = run(root, {'title': 't'})
        assert rc == 1 and 'no uid' in out, out
    finally:
        shutil.rmtree(root)
    print('PASS')


if __name__ == '__main__':
    main()
