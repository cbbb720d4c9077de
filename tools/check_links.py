#!/usr/bin/env python3
"""Checks that what README.md and the pages under docs/ point at exists.

Three kinds of reference, on every page (README.md and every .md file under docs/, recursively):
  1. Links: [text](target), ![alt](target), <a href="target"> and reference definitions
     ([name]: target). A relative target must be a file or folder of the repository, resolved from
     the page's folder; a "#anchor" (alone, or after a Markdown target) must be a heading of that
     page as GitHub slugs it (lower case, punctuation dropped, spaces to hyphens, "-1", "-2" for
     repeats) or an <a id/name> on it. Links with a scheme (https:, mailto:) are not checked.
  2. Repository paths in inline code: every word of a `code span` that starts with a top-level
     folder of the repository (`actors/node/shadow_pairs.hpp`, `bench/burst_bench.cpp`,
     `deploy/ember.yaml`, `gpu/cuda/`) must be a file or folder, from the repository's root.
  3. The same in fenced code blocks (commands: `deploy/setup.sh`, `bench/chaos.py ...`), except a
     path the block itself writes (after `>`, `>>`).
Folders git ignores (/build/, /models/, ...: build outputs and what the demo makes) are not
repository folders, so `build/bin/ember` is not checked. Words with a pattern in them (`<`, `*`,
`{`, `$`) are not paths. A page that tells the reader to write a file of their own under a
repository folder names it in a comment, <!-- made-here: deploy/my-cluster.yaml -->, and that path
then counts as existing on that page.

Exit status 0 when everything resolves; 1 with one line per reference that does not
("PAGE:LINE: what"); 2 when the repository root has no README.md.
Usage: tools/check_links.py [REPO_ROOT]
"""
import os
import re
import sys

FENCE = re.compile(r'^\s{0,3}(`{3,}|~{3,})')
HEADING = re.compile(r'^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
REF_DEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+".*")?\s*$')
HREF = re.compile(r'<a\s[^>]*href="([^"]+)"', re.I)
HTML_ID = re.compile(r'<a\s[^>]*(?:id|name)="([^"]+)"', re.I)
CODE_SPAN = re.compile(r'(`+)(.+?)\1')
MADE_HERE = re.compile(r'<!--\s*made-here:\s*(.*?)\s*-->')
WRITES = re.compile(r'>>?\s*(\S+)')
SCHEME = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:')


def slug(text):
    """GitHub's heading anchor: the heading's text, lower case, without punctuation, spaces to '-'."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)  # a link in a heading keeps its text
    text = re.sub(r'<[^>]+>', '', text)
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def ignored_dirs(root):
    """Top-level folders the repository's .gitignore names (/build/, /build-*/, /models/)."""
    patterns = []
    path = os.path.join(root, '.gitignore')
    if os.path.isfile(path):
        for line in open(path, encoding='utf-8'):
            line = line.strip()
            if line.startswith('/') and line.endswith('/') and line.count('/') == 2:
                patterns.append(re.compile('^' + re.escape(line[1:-1]).replace(r'\*', '.*') + '$'))
    return patterns


def repo_dirs(root):
    ignored = ignored_dirs(root)
    return {d for d in os.listdir(root)
            if os.path.isdir(os.path.join(root, d)) and not any(p.match(d) for p in ignored) and d != '.git'}


def pages(root):
    found = []
    if os.path.isfile(os.path.join(root, 'README.md')):
        found.append('README.md')
    docs = os.path.join(root, 'docs')
    for dirpath, dirnames, filenames in os.walk(docs):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith('.md'):
                found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return found


class Page:
    """A page split into prose lines (code spans kept), fenced blocks, headings and anchors."""

    def __init__(self, root, rel):
        self.rel = rel
        self.prose = []     # (line number, text)
        self.fenced = []    # (line number, text)
        self.anchors = set()
        self.made_here = set()
        counts = {}
        fence = None
        for n, line in enumerate(open(os.path.join(root, rel), encoding='utf-8').read().split('\n'), 1):
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)[0] * len(m.group(1))
                continue
            if fence is not None:
                if line.strip().startswith(fence) and set(line.strip()) == {fence[0]}:
                    fence = None
                else:
                    self.fenced.append((n, line))
                continue
            self.prose.append((n, line))
            for made in MADE_HERE.findall(line):
                self.made_here.update(made.split())
            for a in HTML_ID.findall(line):
                self.anchors.add(a)
            h = HEADING.match(line)
            if h:
                s = slug(h.group(2))
                k = counts.get(s, 0)
                counts[s] = k + 1
                self.anchors.add(s if k == 0 else f'{s}-{k}')


def path_words(text):
    """Words of a code span or command that may be repository paths, without quotes or trailing
    punctuation."""
    for word in re.split(r'[\s=]+', text):
        word = word.strip('"\'(),;')
        word = re.sub(r':\d+$', '', word)      # file.cpp:12
        word = word.rstrip('.:,')
        if word:
            yield word


class Checker:
    def __init__(self, root):
        self.root = root
        self.dirs = repo_dirs(root)
        self.pages = {}
        self.problems = []

    def page(self, rel):
        if rel not in self.pages:
            self.pages[rel] = Page(self.root, rel)
        return self.pages[rel]

    def is_repo_path(self, word):
        if any(c in word for c in '<>*{}[]$|~\\') or word.startswith(('/', '.', '-')) or '/' not in word:
            return False
        return word.split('/', 1)[0] in self.dirs

    def check_path(self, page, n, word, made):
        if not self.is_repo_path(word) or word in made or word.rstrip('/') in made:
            return
        if not os.path.exists(os.path.join(self.root, word)):
            self.problems.append(f'{page.rel}:{n}: path `{word}` is not in the repository')

    def check_link(self, page, n, target):
        if SCHEME.match(target) or target.startswith('//'):
            return
        path, _, anchor = target.partition('#')
        if path:
            full = os.path.normpath(os.path.join(self.root, os.path.dirname(page.rel), path))
            if not full.startswith(os.path.abspath(self.root)) or not os.path.exists(full):
                self.problems.append(f'{page.rel}:{n}: link `{target}` does not resolve')
                return
            if not anchor:
                return
            if not full.endswith('.md') or not os.path.isfile(full):
                return  # an anchor into source code (a line) is GitHub's, not a heading
            there = self.page(os.path.relpath(full, self.root))
        else:
            there = page
        if anchor and anchor not in there.anchors:
            self.problems.append(f'{page.rel}:{n}: link `{target}`: no heading `#{anchor}` in {there.rel}')

    def check(self, rel):
        page = self.page(rel)
        made = page.made_here
        for n, line in page.prose:
            spans = [m.group(2) for m in CODE_SPAN.finditer(line)]
            outside = CODE_SPAN.sub('', line)
            for target in LINK.findall(outside) + HREF.findall(outside):
                self.check_link(page, n, target)
            d = REF_DEF.match(outside)
            if d:
                self.check_link(page, n, d.group(1))
            for span in spans:
                for word in path_words(span):
                    self.check_path(page, n, word, made)
        for n, line in page.fenced:
            written = set(w.strip('"\'') for w in WRITES.findall(line))
            for word in path_words(line):
                if word not in written:
                    self.check_path(page, n, word, made | written)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    if not os.path.isfile(os.path.join(root, 'README.md')):
        print(f'check_links: {root} has no README.md')
        return 2
    checker = Checker(root)
    listed = pages(root)
    for rel in listed:
        checker.check(rel)
    for p in checker.problems:
        print(p)
    if checker.problems:
        print(f'check_links: {len(checker.problems)} reference(s) in README.md and docs/ do not resolve')
        return 1
    print(f'check_links: every link, anchor and repository path of {len(listed)} page(s) resolves')
    return 0


if __name__ == '__main__':
    sys.exit(main())
