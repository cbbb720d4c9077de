#!/usr/bin/python3
"""Checks that the Grafana dashboard (deploy/grafana/*.json) asks only for what Ember exports.

What Ember exports is read from its source: every metric family registered by
`.counter("ember_...", help, {labels})`, `.gauge(...)` or `.histogram(...)` in a .cpp file outside
tests/ (the registry's calls: metrics/metrics.hpp). A gateway's /metrics adds the label `node` to
every series (the process it came from), and a histogram exports NAME_bucket (with `le`), NAME_sum
and NAME_count.

For each query of the dashboard (its panels' targets and its template variables) it checks:
- every ember_* name is an exported family, or a histogram's _bucket/_sum/_count;
- every label a selector matches ({label="..."}) is one that metric has;
- every label a `by (...)` or `without (...)` groups on is one some metric of the query has;
and that the file is JSON with a title, a uid, panels with unique ids and a Prometheus datasource.

Usage: check_dashboard.py [REPO_ROOT] [--dashboard FILE]   (exit 1 and a line per problem)
"""
import argparse
import glob
import json
import os
import re
import sys

REGISTRATION = re.compile(r'\.(counter|gauge|histogram)\(\s*"(ember_[a-z0-9_]+)"')
PROMQL_NAME = re.compile(r'\b(ember_[a-z0-9_]+)\b')
SELECTOR = re.compile(r'\b(ember_[a-z0-9_]+)\s*\{([^}]*)\}')
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)')
GROUPING = re.compile(r'\b(by|without)\s*\(([^)]*)\)')
ALWAYS = {"node"}  # the gateway's merge labels every series with the process it came from


def call_arguments(text, start):
    """The text of a call's arguments from `start` (just after its name's string) to its ')'."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return text[start:]


def exported(root):
    """{family: (kind, {labels})} from the source's registrations."""
    families = {}
    for path in glob.glob(os.path.join(root, "**", "*.cpp"), recursive=True):
        rel = os.path.relpath(path, root)
        if rel.startswith(("tests" + os.sep, "build")) or os.sep + "build" in rel:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for m in REGISTRATION.finditer(text):
            args = call_arguments(text, m.end())
            labels = re.search(r'\{((?:\s*"[a-z_]+"\s*,?)+)\}', args)
            names = set(re.findall(r'"([a-z_]+)"', labels.group(1))) if labels else set()
            families[m.group(2)] = (m.group(1), names)
    return families


def series_labels(name, families):
    """The labels series `name` carries, or None when Ember exports no such series."""
    if name in families:
        return families[name][1] | ALWAYS
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and families.get(base, ("",))[0] == "histogram":
            return families[base][1] | ALWAYS | ({"le"} if suffix == "_bucket" else set())
    return None


def check_query(query, where, families):
    problems = []
    names = set(PROMQL_NAME.findall(query))
    known = {}
    for name in names:
        labels = series_labels(name, families)
        if labels is None:
            problems.append(f"{where}: {name} is not a metric Ember exports")
        else:
            known[name] = labels
    for m in SELECTOR.finditer(query):
        labels = known.get(m.group(1))
        if labels is None:
            continue
        for label, _ in MATCHER.findall(m.group(2)):
            if label not in labels:
                problems.append(f"{where}: {m.group(1)} has no label '{label}' (it has {sorted(labels)})")
    some = set().union(*known.values()) if known else set()
    for m in GROUPING.finditer(query):
        for label in (x.strip() for x in m.group(2).split(",")):
            if label and label not in some:
                problems.append(f"{where}: {m.group(1)} ({label}): no metric of the query has label '{label}'")
    for m in re.finditer(r'label_values\(\s*(ember_[a-z0-9_]+)\s*,\s*([a-zA-Z_]+)\s*\)', query):
        labels = known.get(m.group(1))
        if labels is not None and m.group(2) not in labels:
            problems.append(f"{where}: label_values: {m.group(1)} has no label '{m.group(2)}'")
    if not names and "ember_" not in query:
        problems.append(f"{where}: the query names no Ember metric: {query}")
    return problems


def check_dashboard(path, families):
    try:
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        return [f"{path}: not a JSON dashboard: {e}"]
    problems = [f"{path}: no {key}" for key in ("title", "uid", "panels") if not dash.get(key)]
    ids = set()
    queries = 0
    for panel in dash.get("panels", []):
        title = panel.get("title", "?")
        if panel.get("id") in ids:
            problems.append(f"{path}: panel '{title}': id {panel.get('id')} twice")
        ids.add(panel.get("id"))
        if panel.get("type") == "row":
            continue
        if panel.get("datasource", {}).get("type") != "prometheus":
            problems.append(f"{path}: panel '{title}': not a Prometheus datasource")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{path}: panel '{title}': no query")
        for t in targets:
            queries += 1
            problems += check_query(t.get("expr", ""), f"{path}: panel '{title}' {t.get('refId', '')}", families)
    for var in dash.get("templating", {}).get("list", []):
        q = var.get("query")
        if var.get("type") == "query":
            text = q.get("query", "") if isinstance(q, dict) else str(q)
            queries += 1
            problems += check_query(text, f"{path}: variable '{var.get('name')}'", families)
    return problems, queries


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    parser.add_argument("--dashboard", action="append", help="a dashboard file (default: deploy/grafana/*.json)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    families = exported(root)
    if not families:
        print(f"check_dashboard: no metric registration found under {root}")
        return 1
    paths = args.dashboard or sorted(glob.glob(os.path.join(root, "deploy", "grafana", "*.json")))
    if not paths:
        print("check_dashboard: no dashboard under deploy/grafana/")
        return 1
    problems, queries = [], 0
    for path in paths:
        result = check_dashboard(path, families)
        if isinstance(result, list):
            problems += result
            continue
        problems += result[0]
        queries += result[1]
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check_dashboard: {queries} queries in {len(paths)} dashboard(s) name only metrics and labels Ember "
          f"exports ({len(families)} families)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
