#!/usr/bin/env python3
"""Check META.json against the PGXN Meta Spec 1.0.0, and against the tree.

    python3 scripts/check-meta.py [META.json]

The spec's rules (required keys, the types and forms of their values) and,
beyond the spec, that the tree agrees with META.json: each extension in
"provides" has a .control file whose default_version is the extension's
version (0.1 -> 0.1.0) and which CREATE EXTENSION can install (an install
script of it, or of an older version and update scripts to it), its "file"
and "docfile" exist, and
debian/changelog's version (when there is one) is the distribution's.
Standard library only.  Prints "check-meta: ok", or one line per problem
and exits 1 (2 when the file cannot be read at all).
"""
import json
import os
import re
import sys

# Semantic Versioning 2.0.0 (the spec's Version type; no leading zeros).
_NUM = r"(?:0|[1-9][0-9]*)"
_PRE = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
SEMVER = (_NUM + r"\." + _NUM + r"\." + _NUM
          + r"(?:-" + _PRE + r"(?:\." + _PRE + r")*)?"
          + r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")
SEMVER_RE = re.compile(SEMVER + r"\Z")
# Version range: "0", or [op] version, several joined by commas.
_CLAUSE = r"(?:(?:==|!=|<=|>=|<|>)\s*)?(?:" + SEMVER + r"|0)"
RANGE_RE = re.compile(_CLAUSE + r"(?:\s*,\s*" + _CLAUSE + r")*\Z")
# Term: 2+ characters, no slash, backslash, whitespace or control character.
TERM_RE = re.compile(r"[^/\\\s\x00-\x1f\x7f]{2,}\Z")
# Tag: as a Term, but spaces allowed; at most 255 characters.
TAG_RE = re.compile(r"[^/\\\x00-\x1f\x7f]{2,255}\Z")
CUSTOM_RE = re.compile(r"[xX]_.")
URI_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:\S+\Z")
EMAIL_RE = re.compile(r"[^@\s]+@[^@\s]+\Z")

LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
    "restricted", "unrestricted", "unknown",
}
REQUIRED = ["name", "version", "abstract", "maintainer", "license", "provides",
            "meta-spec"]
OPTIONAL = ["description", "generated_by", "tags", "no_index", "prereqs",
            "release_status", "resources"]
PHASES = ["configure", "build", "test", "runtime", "develop"]
RELATIONS = ["requires", "recommends", "suggests", "conflicts"]
SPEC_URLS = ["https://pgxn.org/meta/spec.txt", "http://pgxn.org/meta/spec.txt"]


class Checker:
    def __init__(self):
        self.problems = []

    def bad(self, where, msg):
        self.problems.append("%s: %s" % (where, msg))

    # -- value types ---------------------------------------------------------

    def string(self, where, v, minlen=1):
        if not isinstance(v, str):
            self.bad(where, "must be a string, not %s" % type(v).__name__)
            return False
        if len(v) < minlen:
            self.bad(where, "must be at least %d character(s)" % minlen)
            return False
        return True

    def pattern(self, where, v, regex, what):
        if self.string(where, v) and not regex.match(v):
            self.bad(where, "%r is not a valid %s" % (v, what))

    def version(self, where, v):
        self.pattern(where, v, SEMVER_RE, "semantic version (e.g. 1.2.0)")

    def term(self, where, v):
        self.pattern(where, v, TERM_RE,
                     "term (2+ characters, no slash, backslash, space or "
                     "control character)")

    def path(self, where, v):
        if not self.string(where, v, 2):
            return
        if v.startswith("/") or "\\" in v or ".." in v.split("/"):
            self.bad(where, "%r must be a relative path with Unix conventions"
                     % v)

    def obj(self, where, v, known, required=(), any_of=None, min_props=0):
        """An object whose keys are known or custom (x_...)."""
        if not isinstance(v, dict):
            self.bad(where, "must be an object, not %s" % type(v).__name__)
            return False
        for k in v:
            if k not in known and not CUSTOM_RE.match(k):
                self.bad(where, "unknown key %r" % k)
        for k in required:
            if k not in v:
                self.bad(where, "missing required key %r" % k)
        if any_of and not any(all(k in v for k in keys) for keys in any_of):
            self.bad(where, "needs %s" % " or ".join(
                "+".join(keys) for keys in any_of))
        if len(v) < min_props:
            self.bad(where, "must not be empty")
        return True

    # -- fields --------------------------------------------------------------

    def maintainer(self, where, v):
        if isinstance(v, list):
            if not v:
                self.bad(where, "must not be an empty list")
            for i, m in enumerate(v):
                self.string("%s[%d]" % (where, i), m)
        else:
            self.string(where, v)

    def license(self, where, v):
        def one(w, name):
            if self.string(w, name) and name not in LICENSES:
                self.bad(w, "%r is not a known license (%s), or use an "
                         "object of name: URL" % (name, ", ".join(
                             sorted(LICENSES))))
        if isinstance(v, list):
            if not v:
                self.bad(where, "must not be an empty list")
            for i, name in enumerate(v):
                one("%s[%d]" % (where, i), name)
        elif isinstance(v, dict):
            if not v:
                self.bad(where, "must not be empty")
            for name, url in v.items():
                if self.string("%s.%s" % (where, name), url) \
                        and not URI_RE.match(url):
                    self.bad("%s.%s" % (where, name), "%r is not a URI" % url)
        else:
            one(where, v)

    def provides(self, where, v):
        if not self.obj(where, v, known=v if isinstance(v, dict) else {},
                        min_props=1):
            return
        for ext, e in v.items():
            w = "%s.%s" % (where, ext)
            self.term(w + " (name)", ext)
            if not self.obj(w, e, ["file", "version", "abstract", "docfile",
                                   "docpath"], required=["file", "version"]):
                continue
            if "file" in e:
                self.path(w + ".file", e["file"])
            if "docfile" in e:
                self.path(w + ".docfile", e["docfile"])
            if "version" in e:
                self.version(w + ".version", e["version"])
            if "abstract" in e:
                self.string(w + ".abstract", e["abstract"])

    def meta_spec(self, where, v):
        if not self.obj(where, v, ["version", "url"], required=["version"]):
            return
        if "version" in v and self.string(where + ".version", v["version"]) \
                and not re.match(r"1\.0\.[0-9]+\Z", v["version"]):
            self.bad(where + ".version",
                     "%r: this checker knows meta-spec 1.0.x" % v["version"])
        if "url" in v and v["url"] not in SPEC_URLS:
            self.bad(where + ".url", "must be one of %s" % ", ".join(SPEC_URLS))

    def tags(self, where, v):
        if not isinstance(v, list) or not v:
            self.bad(where, "must be a non-empty list of strings")
            return
        for i, t in enumerate(v):
            self.pattern("%s[%d]" % (where, i), t, TAG_RE,
                         "tag (2-255 characters, no slash, backslash or "
                         "control character)")

    def no_index(self, where, v):
        if not self.obj(where, v, ["file", "directory"],
                        any_of=[["file"], ["directory"]]):
            return
        for k in ("file", "directory"):
            if k not in v:
                continue
            items = v[k] if isinstance(v[k], list) else [v[k]]
            if isinstance(v[k], list) and not v[k]:
                self.bad("%s.%s" % (where, k), "must not be an empty list")
            for i, p in enumerate(items):
                self.path("%s.%s[%d]" % (where, k, i), p)

    def prereqs(self, where, v):
        if not self.obj(where, v, PHASES, min_props=1):
            return
        for phase in PHASES:
            if phase not in v:
                continue
            wp = "%s.%s" % (where, phase)
            if not self.obj(wp, v[phase], RELATIONS, min_props=1):
                continue
            for rel in RELATIONS:
                if rel not in v[phase]:
                    continue
                wr = "%s.%s" % (wp, rel)
                if not self.obj(wr, v[phase][rel], v[phase][rel]
                                if isinstance(v[phase][rel], dict) else {}):
                    continue
                for name, rng in v[phase][rel].items():
                    w = "%s.%s" % (wr, name)
                    self.term(w + " (name)", name)
                    if rng == 0 and not isinstance(rng, bool):
                        continue
                    self.pattern(w, rng, RANGE_RE, "version range (0, "
                                 "\"1.2.0\", \">= 1.2.0, < 2.0.0\")")

    def resources(self, where, v):
        if not self.obj(where, v, ["homepage", "bugtracker", "repository"],
                        min_props=1):
            return
        def uri(w, u):
            if self.string(w, u) and not URI_RE.match(u):
                self.bad(w, "%r is not a URI" % u)
        if "homepage" in v:
            uri(where + ".homepage", v["homepage"])
        b = v.get("bugtracker")
        if b is not None and self.obj(where + ".bugtracker", b,
                                      ["web", "mailto"],
                                      any_of=[["web"], ["mailto"]]):
            if "web" in b:
                uri(where + ".bugtracker.web", b["web"])
            if "mailto" in b:
                self.pattern(where + ".bugtracker.mailto", b["mailto"],
                             EMAIL_RE, "email address")
        r = v.get("repository")
        if r is not None and self.obj(where + ".repository", r,
                                      ["url", "web", "type"],
                                      any_of=[["url", "type"], ["web"]]):
            for k in ("url", "web"):
                if k in r:
                    uri("%s.repository.%s" % (where, k), r[k])
            if "type" in r:
                self.string(where + ".repository.type", r["type"])

    def meta(self, m):
        if not self.obj("META.json", m, REQUIRED + OPTIONAL, REQUIRED):
            return
        if "name" in m:
            self.term("name", m["name"])
        if "version" in m:
            self.version("version", m["version"])
        for k in ("abstract", "description", "generated_by"):
            if k in m:
                self.string(k, m[k])
        if "maintainer" in m:
            self.maintainer("maintainer", m["maintainer"])
        if "license" in m:
            self.license("license", m["license"])
        if "provides" in m:
            self.provides("provides", m["provides"])
        if "meta-spec" in m:
            self.meta_spec("meta-spec", m["meta-spec"])
        if "tags" in m:
            self.tags("tags", m["tags"])
        if "no_index" in m:
            self.no_index("no_index", m["no_index"])
        if "prereqs" in m:
            self.prereqs("prereqs", m["prereqs"])
        if "release_status" in m and m["release_status"] not in (
                "stable", "testing", "unstable"):
            self.bad("release_status", "must be stable, testing or unstable")
        if "resources" in m:
            self.resources("resources", m["resources"])

    # -- the tree ------------------------------------------------------------

    def tree(self, m, root):
        """META.json against the files beside it."""
        provides = m.get("provides")
        if not isinstance(provides, dict):
            return
        for ext, e in provides.items():
            if not isinstance(e, dict):
                continue
            w = "provides.%s" % ext
            for k in ("file", "docfile"):
                p = e.get(k)
                if isinstance(p, str) and not os.path.isfile(
                        os.path.join(root, p)):
                    self.bad("%s.%s" % (w, k), "%s does not exist" % p)
            control = os.path.join(root, ext + ".control")
            if not os.path.isfile(control):
                self.bad(w, "%s.control does not exist" % ext)
                continue
            default = control_default_version(control)
            if default is None:
                self.bad(w, "%s.control has no default_version" % ext)
                continue
            want = semver_of(default)
            if e.get("version") != want:
                self.bad(w + ".version", "%r, but %s.control's default_version "
                         "is %r (%s)" % (e.get("version"), ext, default, want))
            if not installable(root, ext, default):
                self.bad(w, "no install script reaches default_version %s "
                         "(%s--%s.sql, or an older one and update scripts "
                         "to it)" % (default, ext, default))
        changelog = os.path.join(root, "debian", "changelog")
        if os.path.isfile(changelog) and isinstance(m.get("version"), str):
            with open(changelog, encoding="utf-8") as f:
                first = f.readline()
            mo = re.match(r"\S+ \(([^)]+)\)", first)
            deb = mo.group(1) if mo else None
            # Debian version: [epoch:]upstream[-revision]
            upstream = deb and re.sub(r"^[0-9]+:", "", deb)
            upstream = upstream and re.sub(r"-[^-]*$", "", upstream)
            if upstream != m["version"]:
                self.bad("version", "%r, but debian/changelog's version is %r"
                         % (m["version"], deb))


def installable(root, ext, version):
    """Whether CREATE EXTENSION can reach 'version': its install script, or
    an install script of another version and a chain of update scripts
    (ext--from--to.sql) from it, as PostgreSQL finds one."""
    names = os.listdir(root)
    installs = set()
    updates = {}
    for n in names:
        mo = re.fullmatch(re.escape(ext) + r"--([^-]+)--([^-]+)\.sql", n)
        if mo:
            updates.setdefault(mo.group(1), set()).add(mo.group(2))
            continue
        mo = re.fullmatch(re.escape(ext) + r"--([^-]+)\.sql", n)
        if mo:
            installs.add(mo.group(1))
    seen, todo = set(installs), list(installs)
    while todo:
        for nxt in updates.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return version in seen


def control_default_version(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            mo = re.match(r"\s*default_version\s*=\s*'([^']*)'", line)
            if mo:
                return mo.group(1)
    return None


def semver_of(v):
    """An extension version as a semantic version: 0.1 -> 0.1.0."""
    parts = v.split(".")
    if all(p.isdigit() for p in parts) and 1 <= len(parts) <= 3:
        return ".".join(str(int(p)) for p in parts + ["0"] * (3 - len(parts)))
    return v


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = argv[1] if len(argv) > 1 else os.path.join(root, "META.json")
    root = os.path.dirname(os.path.abspath(path))
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        print("check-meta: %s: %s" % (path, e))
        return 2
    c = Checker()
    c.meta(m)
    if isinstance(m, dict):
        c.tree(m, root)
    if c.problems:
        for p in c.problems:
            print("check-meta: %s" % p)
        print("check-meta: %d problem(s) in %s" % (len(c.problems), path))
        return 1
    print("check-meta: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
