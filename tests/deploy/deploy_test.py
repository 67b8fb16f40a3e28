#!/usr/bin/env python3
"""Tests of deploy/: what an operator installs, checked with the real tools and the real collector.

  SystemdUnit     systemd-analyze verify of the unit and of the injection drop-in (no warning),
                  its sandboxing score (systemd-analyze security --offline), the sysusers file
                  (systemd-sysusers --dry-run), the job environment scripts
  CollectorFlags  every flag of the unit's ExecStart and of the Kubernetes DaemonSet is one that
                  `cuflight-collector --help` lists, and the real collector starts with them
                  (paths, group and ports moved into a temporary directory)
  Manifests       the Kubernetes pod example agrees with the DaemonSet (socket, library, uid,
                  group, volumes)
  PrometheusRules promtool check rules and promtool test rules; every series the rules and their
                  test inputs name is one a real collector exposes, with its real labels; the
                  example Prometheus configurations pass promtool check config
  Dashboard       every PromQL expression of the Grafana dashboard parses (promtool check rules,
                  each as a recording rule) and names only series a real collector exposes
  Extractor       the metric-name extractor these checks rely on, on hand-written expressions

The real collector (CUFLIGHT_COLLECTOR_BIN) is started once, fed one event of every type by
feed_collector (CUFLIGHT_FEED_COLLECTOR) and scraped. promtool (Debian package prometheus) and
systemd-analyze (package systemd) come from scripts/setup; a test whose tool is missing skips,
saying which package provides it. Run: deploy_test.py [TestClass ...]; exit status 77 when every
test that ran was skipped (CTest's SKIP_RETURN_CODE).
"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

try:
    import yaml
except ImportError:  # scripts/setup installs python3-yaml
    yaml = None

SOURCE_DIR = os.environ.get(
    'CUFLIGHT_SOURCE_DIR', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
DEPLOY = os.path.join(SOURCE_DIR, 'deploy')
COLLECTOR = os.environ.get('CUFLIGHT_COLLECTOR_BIN', '')
FEED = os.environ.get('CUFLIGHT_FEED_COLLECTOR', '')

UNIT = os.path.join(DEPLOY, 'systemd', 'cuflight-collector.service')
DAEMONSET = os.path.join(DEPLOY, 'kubernetes', 'cuflight-collector.yaml')
POD = os.path.join(DEPLOY, 'kubernetes', 'gpu-pod-example.yaml')
RULES = os.path.join(DEPLOY, 'prometheus', 'cuflight.rules.yml')
RULES_TEST = os.path.join(DEPLOY, 'prometheus', 'cuflight.rules.test.yml')
DASHBOARD = os.path.join(DEPLOY, 'grafana', 'cuflight-dashboard.json')

# Series the rules and the dashboard may name although a freshly fed collector does not expose
# them. Each says why; nothing else is excused.
NOT_FROM_THE_COLLECTOR = {
    # Prometheus's own series for every scrape target (1 when the scrape succeeded):
    # https://prometheus.io/docs/concepts/jobs_instances/#automatically-generated-labels-and-time-series
    'up': {'instance', 'job'},
    # The stall gauge: the age of the oldest launched kernel that has not finished, per process
    # and device. Exported only while such a kernel exists, which a fed collector never has (and
    # added by the collector's stall detection, issue 15). Its labels are not known here.
    'cuflight_kernel_oldest_unfinished_seconds': None,
}
# Labels Prometheus attaches to every scraped series (the target's).
TARGET_LABELS = {'instance', 'job'}

# Grafana's variables, replaced by values Prometheus accepts before parsing
# (https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/).
GRAFANA_VARIABLES = [
    ('$__rate_interval', '5m'), ('$__interval', '1m'), ('$__range', '1h'),
    ('${instance}', '.*'), ('$instance', '.*'),
]


def tool(name, package):
    path = shutil.which(name)
    if path is None:
        raise unittest.SkipTest(f'{name} is not installed (Debian package {package}; scripts/setup '
                                f'installs it)')
    return path


def need_yaml():
    if yaml is None:
        raise AssertionError('python3-yaml is missing: run scripts/setup')


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kwargs)


# ---- PromQL: the metric names an expression reads ----

PROMQL_AGGREGATIONS = {
    'sum', 'min', 'max', 'avg', 'group', 'stddev', 'stdvar', 'count', 'count_values', 'bottomk',
    'topk', 'quantile', 'limitk', 'limit_ratio'}
PROMQL_KEYWORDS = {
    'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'offset', 'bool', 'and', 'or',
    'unless', 'atan2', 'inf', 'nan', 'Inf', 'NaN'}


def metric_names(expr):
    """The metric names a PromQL expression selects: every identifier that is not a function or
    an aggregation (followed by '('), a keyword, a label name (inside braces or grouping clauses)
    or part of a number or duration. Strings, label matchers and ranges are removed first."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    s = re.sub(r'\{[^{}]*\}', '{}', s)
    s = re.sub(r'\[[^\[\]]*\]', '[]', s)
    s = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)', r' \1 ', s)
    names = set()
    for m in re.finditer(r'(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*', s):
        word = m.group(0)
        if word in PROMQL_KEYWORDS or word in PROMQL_AGGREGATIONS:
            continue
        if re.match(r'\s*\(', s[m.end():]):
            continue  # a function call
        names.add(word)
    return names


def selectors(expr):
    """(metric name, set of label names matched) for each selector with braces."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    out = []
    for m in re.finditer(r'(?<![A-Za-z0-9_:.])([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^{}]*)\}', s):
        labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)', m.group(2)))
        out.append((m.group(1), labels))
    return out


def grafana_to_promql(expr):
    for variable, value in GRAFANA_VARIABLES:
        expr = expr.replace(variable, value)
    return expr


# ---- the real collector, fed and scraped once ----

class FedCollector:
    """cuflight-collector in a temporary directory, fed one event of every type."""
    _instance = None

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def __init__(self):
        if not os.access(COLLECTOR, os.X_OK) or not os.access(FEED, os.X_OK):
            raise AssertionError('set CUFLIGHT_COLLECTOR_BIN and CUFLIGHT_FEED_COLLECTOR to the '
                                 'built cuflight-collector and feed_collector (CTest does)')
        self.dir = tempfile.mkdtemp(prefix='cuflight-deploy-')
        os.chmod(self.dir, 0o700)
        sock = os.path.join(self.dir, 'run', 'collector.sock')
        self.log = open(os.path.join(self.dir, 'collector.out'), 'w+')
        self.proc = subprocess.Popen(
            [COLLECTOR, '--socket', sock, '--log-dir', os.path.join(self.dir, 'logs'),
             '--metrics', '127.0.0.1:0', '--reconnect-grace', '0'],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self._wait_for_port()
        fed = run([FEED, sock])
        if fed.returncode != 0:
            raise AssertionError(f'feed_collector failed: {fed.stderr}\n{self.output()}')
        self.samples = self._scrape_until_fed()

    def output(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def _wait_for_port(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = re.search(r'metrics at http://127\.0\.0\.1:(\d+)/metrics', self.output())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f'the collector did not serve metrics:\n{self.output()}')

    def scrape(self):
        with urllib.request.urlopen(f'http://127.0.0.1:{self.port}/metrics', timeout=10) as r:
            text = r.read().decode()
        samples = {}  # name -> set of label names
        for line in text.splitlines():
            if not line or line.startswith('#'):
                continue
            m = re.match(r'([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s', line)
            assert m, f'not an exposition line: {line!r}'
            labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', m.group(3) or ''))
            samples.setdefault(m.group(1), set()).update(labels)
        return samples, text

    def _scrape_until_fed(self):
        # Every event type stored (process_lost written by the collector), a line rejected.
        types = ['process_start', 'device', 'kernel', 'kernel_time', 'api_error', 'stats',
                 'process_end', 'process_lost', 'process_crash']
        deadline = time.monotonic() + 30
        while True:
            samples, text = self.scrape()
            missing = [t for t in types
                       if not re.search(r'^cuflight_events_stored_total\{type="%s"\} [1-9]' % t,
                                        text, re.M)]
            if not re.search(r'^cuflight_events_rejected_total\{reason="malformed_json"\} 1',
                             text, re.M):
                missing.append('a rejected line')
            if not missing:
                return samples
            if time.monotonic() > deadline:
                raise AssertionError(f'the collector never counted {missing}:\n{text}')
            time.sleep(0.1)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def check_names_exposed(test, names, where, defined=()):
    exposed = FedCollector.get().samples
    for name in sorted(names):
        if name in defined or name in NOT_FROM_THE_COLLECTOR:
            continue
        test.assertIn(name, exposed, f'{where} names {name}, which the collector does not expose')


def check_labels_exposed(test, name, labels, where):
    exposed = FedCollector.get().samples
    if name in NOT_FROM_THE_COLLECTOR:
        known = NOT_FROM_THE_COLLECTOR[name]
        if known is not None:
            test.assertLessEqual(labels, known, f'{where}: {name} has no label {labels - known}')
        return
    if name not in exposed:
        return  # reported by check_names_exposed
    allowed = exposed[name] | TARGET_LABELS
    test.assertLessEqual(labels, allowed, f'{where}: {name} has no label {labels - allowed}')


# ---- the tests ----

class Extractor(unittest.TestCase):
    def test_names_functions_keywords_labels_and_numbers_apart(self):
        expr = ('sum by (instance, kernel) (rate(a_total{x="y{z}", k=~"b|c"}[5m])) '
                '/ on (instance) group_left () b offset 10m > 0.5e3 and bool 1')
        self.assertEqual(metric_names(expr), {'a_total', 'b'})
        self.assertEqual(metric_names('topk(3, c) unless d or e{__name__="x"}'), {'c', 'd', 'e'})
        self.assertEqual(
            metric_names('histogram_quantile(0.5, sum by (le) (rate(h_bucket[5m:1m])))'),
            {'h_bucket'})
        self.assertEqual(metric_names('count(x:y:rate5m) without (job) >= 0x1F'), {'x:y:rate5m'})
        self.assertEqual(metric_names('sum(f) by (instance) - max without (a, b) (g)'), {'f', 'g'})

    def test_selectors_give_their_label_names(self):
        self.assertEqual(selectors('rate(a{x="1", y!~"2"}[5m]) + b{z="{"}'),
                         [('a', {'x', 'y'}), ('b', {'z'})])

    def test_grafana_variables_become_promql(self):
        self.assertEqual(grafana_to_promql('rate(a{instance=~"$instance"}[$__rate_interval])'),
                         'rate(a{instance=~".*"}[5m])')


class SystemdUnit(unittest.TestCase):
    def setUp(self):
        self.analyze = tool('systemd-analyze', 'systemd')
        self.tmp = tempfile.mkdtemp(prefix='cuflight-unit-')

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def unit_with_built_collector(self):
        # verify checks that ExecStart's binary exists: point it at the one built here.
        with open(UNIT) as f:
            text = f.read()
        self.assertIn('ExecStart=/usr/local/bin/cuflight-collector', text)
        path = os.path.join(self.tmp, 'cuflight-collector.service')
        with open(path, 'w') as f:
            f.write(text.replace('/usr/local/bin/cuflight-collector', COLLECTOR))
        return path

    def test_the_unit_verifies_without_a_warning(self):
        r = run([self.analyze, 'verify', self.unit_with_built_collector()], cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((r.stdout + r.stderr).strip(), '', 'systemd-analyze verify warned')

    def test_the_unit_is_sandboxed(self):
        # Exposure 0.0 (locked down) .. 10.0; systemd calls below 2.0 "OK". The options the
        # collector cannot take (PrivateUsers=, PrivateNetwork=) are explained in the unit.
        r = run([self.analyze, 'security', '--offline=yes', '--threshold=20',
                 self.unit_with_built_collector()], cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr)

    def test_the_injection_drop_in_verifies_without_a_warning(self):
        # A GPU service with the drop-in in its .d directory, as the README installs it.
        service = os.path.join(self.tmp, 'gpu-app.service')
        with open(service, 'w') as f:
            f.write('[Unit]\nDescription=a GPU application\n[Service]\nExecStart=/bin/true\n')
        os.mkdir(service + '.d')
        shutil.copy(os.path.join(DEPLOY, 'systemd', 'cuflight-inject.conf'),
                    os.path.join(service + '.d', 'cuflight.conf'))
        r = run([self.analyze, 'verify', service], cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((r.stdout + r.stderr).strip(), '', 'systemd-analyze verify warned')

    def test_sysusers_creates_the_collectors_user_and_group(self):
        sysusers = tool('systemd-sysusers', 'systemd')
        os.mkdir(os.path.join(self.tmp, 'etc'))
        r = run([sysusers, '--dry-run', '--root=' + self.tmp,
                 os.path.join(DEPLOY, 'systemd', 'cuflight.sysusers.conf')])
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout + r.stderr
        self.assertIn("Creating group 'cuflight'", out)
        self.assertIn("Creating user 'cuflight'", out)

    def test_the_environment_file_holds_what_the_library_reads(self):
        # Each variable: NVIDIA's CUDA_INJECTION64_PATH, or one of the library's (README table).
        with open(os.path.join(SOURCE_DIR, 'README.md')) as f:
            documented = set(re.findall(r'^\| `(CUFLIGHT_[A-Z_]+)`', f.read(), re.M))
        with open(os.path.join(DEPLOY, 'systemd', 'inject.env.in')) as f:
            assignments = [l for l in f.read().splitlines() if l and not l.startswith('#')]
        names = [l.split('=', 1)[0] for l in assignments]
        self.assertEqual(names, ['CUDA_INJECTION64_PATH', 'CUFLIGHT_COLLECTOR',
                                 'CUFLIGHT_COLLECTOR_UID'])
        for name in names[1:]:
            self.assertIn(name, documented)
        with open(UNIT) as f:
            unit = f.read()
        socket_flag = re.search(r'--socket (\S+)', unit).group(1)
        self.assertIn('CUFLIGHT_COLLECTOR=' + socket_flag, assignments)

    def test_the_slurm_prolog_exports_the_file_to_members_only(self):
        env = os.path.join(self.tmp, 'inject.env')
        with open(env, 'w') as f:
            f.write('# a comment\nCUFLIGHT_COLLECTOR=/run/cuflight/collector.sock\n'
                    'CUFLIGHT_COLLECTOR_UID=998\n')
        prolog = os.path.join(DEPLOY, 'systemd', 'slurm-task-prolog.sh')
        my_group = run(['id', '-gn']).stdout.strip()
        member = run(['sh', prolog], env=dict(os.environ, CUFLIGHT_INJECT_ENV=env,
                                               CUFLIGHT_GROUP=my_group))
        self.assertEqual(member.returncode, 0, member.stderr)
        self.assertEqual(member.stdout, 'export CUFLIGHT_COLLECTOR=/run/cuflight/collector.sock\n'
                                        'export CUFLIGHT_COLLECTOR_UID=998\n')
        other = run(['sh', prolog], env=dict(os.environ, CUFLIGHT_INJECT_ENV=env,
                                              CUFLIGHT_GROUP='no-such-group-here'))
        self.assertEqual((other.returncode, other.stdout), (0, ''))


def unit_flags():
    with open(UNIT) as f:
        text = f.read().replace('\\\n', ' ')
    line = re.search(r'^ExecStart=(.*)$', text, re.M).group(1)
    words = shlex.split(line)
    assert words[0].endswith('/cuflight-collector'), words[0]
    return words[1:]


def daemonset_collector_args():
    need_yaml()
    with open(DAEMONSET) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    found = []
    for d in docs:
        if d.get('kind') != 'DaemonSet':
            continue
        for c in d['spec']['template']['spec']['containers']:
            if c.get('command', [''])[0].endswith('/cuflight-collector'):
                found.append((c['command'][1:] + c.get('args', []), c))
    assert found, 'no cuflight-collector container in the DaemonSet'
    return found


def split_flags(words):
    """[(flag, value or None)] from --flag=value, --flag value and --flag."""
    out = []
    i = 0
    while i < len(words):
        w = words[i]
        assert w.startswith('--'), f'not a flag: {w}'
        if '=' in w:
            out.append(tuple(w.split('=', 1)))
        elif i + 1 < len(words) and not words[i + 1].startswith('--'):
            out.append((w, words[i + 1]))
            i += 1
        else:
            out.append((w, None))
        i += 1
    return out


class CollectorFlags(unittest.TestCase):
    def help_text(self):
        r = run([COLLECTOR, '--help'])
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def check_known(self, flags, where):
        text = self.help_text()
        for flag, _ in flags:
            self.assertTrue(re.search(r'(?<![\w-])' + re.escape(flag) + r'(?![\w-])', text),
                            f'{where}: {flag} is not a flag of cuflight-collector --help')

    def start_with(self, flags, env=None):
        """Runs the collector with `flags`, files moved into a temporary directory, ports 0, the
        socket group one this user has; it must listen on the socket and stop with status 0."""
        tmp = tempfile.mkdtemp(prefix='cuflight-flags-')
        try:
            os.chmod(tmp, 0o700)
            args = []
            sock = None
            for flag, value in flags:
                if value is not None:
                    for name, sub in (env or {}).items():
                        value = value.replace(f'$({name})', sub)
                if flag == '--socket':
                    value = sock = os.path.join(tmp, 'run', os.path.basename(value))
                elif flag == '--log-dir':
                    value = os.path.join(tmp, 'logs')
                elif flag == '--socket-group':
                    value = str(os.getegid())
                elif flag in ('--metrics', '--tcp'):
                    value = value.rsplit(':', 1)[0] + ':0'
                args += [flag] if value is None else [flag, value]
            self.assertIsNotNone(sock, 'no --socket')
            with open(os.path.join(tmp, 'out'), 'w+') as out:
                p = subprocess.Popen([COLLECTOR] + args, stdout=out, stderr=subprocess.STDOUT)
                deadline = time.monotonic() + 20
                while not os.path.exists(sock) and p.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                running = p.poll() is None
                p.send_signal(signal.SIGTERM)
                status = p.wait(timeout=30)
                out.seek(0)
                log = out.read()
            self.assertTrue(running and os.path.exists(os.path.dirname(sock)), log)
            self.assertEqual(status, 0, log)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_the_units_flags_exist_and_start_the_collector(self):
        flags = split_flags(unit_flags())
        self.check_known(flags, 'cuflight-collector.service')
        self.start_with(flags)

    def test_the_daemonsets_flags_exist_and_start_the_collector(self):
        for args, _ in daemonset_collector_args():
            flags = split_flags(args)
            self.check_known(flags, 'cuflight-collector.yaml')
            self.start_with(flags, env={'POD_IP': '127.0.0.1'})


class Manifests(unittest.TestCase):
    def test_the_pod_example_reaches_the_daemonsets_socket_and_library(self):
        need_yaml()
        (args, collector), = daemonset_collector_args()
        flags = dict(split_flags(args))
        with open(DAEMONSET) as f:
            ds = next(d for d in yaml.safe_load_all(f) if d and d.get('kind') == 'DaemonSet')
        spec = ds['spec']['template']['spec']
        host = {v['name']: v['hostPath']['path'] for v in spec['volumes']}
        uid = collector['securityContext']['runAsUser']
        self.assertNotEqual(uid, 0, 'the collector runs as a user of its own')
        self.assertEqual(flags['--socket-group'], str(collector['securityContext']['runAsGroup']))
        mounts = {m['name']: m['mountPath'] for m in collector['volumeMounts']}
        socket_dir = os.path.dirname(flags['--socket'])
        socket_host_dir = next(host[n] for n, p in mounts.items() if p == socket_dir)
        init = spec['initContainers'][0]
        init_mounts = {m['mountPath']: host[m['name']] for m in init['volumeMounts']}
        script = ' '.join(init['args'])
        library = re.search(r'mv -f \S+ (\S+)', script).group(1)
        library_host = init_mounts[os.path.dirname(library)] + '/' + os.path.basename(library)

        with open(POD) as f:
            pod = yaml.safe_load(f)
        self.assertIn(int(flags['--socket-group']), pod['spec']['securityContext']['supplementalGroups'])
        pod_host = {v['name']: v['hostPath']['path'] for v in pod['spec']['volumes']}
        for c in pod['spec']['containers']:
            env = {e['name']: e.get('value') for e in c['env']}
            self.assertEqual(env['CUFLIGHT_COLLECTOR_UID'], str(uid))
            pod_mounts = {m['mountPath']: pod_host[m['name']] for m in c['volumeMounts']}

            def on_host(path):
                d = os.path.dirname(path)
                self.assertIn(d, pod_mounts, f'{path} is not on a volume of the pod')
                return pod_mounts[d] + '/' + os.path.basename(path)

            self.assertEqual(on_host(env['CUFLIGHT_COLLECTOR']),
                             socket_host_dir + '/' + os.path.basename(flags['--socket']))
            self.assertEqual(on_host(env['CUDA_INJECTION64_PATH']), library_host)


    def test_the_pod_example_gives_the_attribution_its_pod(self):
        # The downward API's fields, under names the injected library reads by default (its
        # allow-list, schema/env/include/cuflight/env/attribution.h).
        need_yaml()
        with open(os.path.join(SOURCE_DIR, 'schema', 'env', 'include', 'cuflight', 'env',
                               'attribution.h')) as f:
            header = f.read()
        listed = header[header.index('kAttributionVariables'):]
        allowed = set(re.findall(r'"([A-Z0-9_]+)"', listed[:listed.index('};')]))
        with open(POD) as f:
            pod = yaml.safe_load(f)
        for c in pod['spec']['containers']:
            fields = {e['name']: e['valueFrom']['fieldRef']['fieldPath']
                      for e in c['env'] if 'valueFrom' in e}
            self.assertEqual(fields, {'POD_NAME': 'metadata.name',
                                      'POD_NAMESPACE': 'metadata.namespace',
                                      'POD_UID': 'metadata.uid'})
            self.assertLessEqual(set(fields), allowed)

class PrometheusRules(unittest.TestCase):
    def test_the_rules_pass_promtool_check(self):
        r = run([tool('promtool', 'prometheus'), 'check', 'rules', RULES])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn('SUCCESS', r.stdout)

    def test_the_rules_pass_their_promtool_tests(self):
        r = run([tool('promtool', 'prometheus'), 'test', 'rules', RULES_TEST],
                cwd=os.path.dirname(RULES_TEST))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_the_example_configurations_pass_promtool_check(self):
        promtool = tool('promtool', 'prometheus')
        need_yaml()
        directory = os.path.dirname(RULES)
        for name in ('prometheus.example.yml', 'federate.example.yml',
                     'prometheus-kubernetes.example.yml'):
            path = os.path.join(directory, name)
            with open(path) as f:
                config = yaml.safe_load(f)
            # Debian's Prometheus is built without Kubernetes service discovery, so its promtool
            # does not know kubernetes_sd_configs: that block is replaced by a static target and
            # the rest (relabelling, rule files) is checked.
            for job in config.get('scrape_configs', []):
                if job.pop('kubernetes_sd_configs', None) is not None:
                    job['static_configs'] = [{'targets': ['10.0.0.1:9464']}]
            with tempfile.TemporaryDirectory() as tmp:
                for rule_file in config.get('rule_files', []):  # relative to the configuration
                    shutil.copy(os.path.join(directory, rule_file), tmp)
                checked = os.path.join(tmp, name)
                with open(checked, 'w') as f:
                    yaml.safe_dump(config, f)
                r = run([promtool, 'check', 'config', checked])
            self.assertEqual(r.returncode, 0, f'{name}: {r.stdout}{r.stderr}')

    def test_the_rules_name_only_series_the_collector_exposes(self):
        need_yaml()
        with open(RULES) as f:
            rules = [r for g in yaml.safe_load(f)['groups'] for r in g['rules']]
        recorded = {r['record'] for r in rules if 'record' in r}
        for r in rules:
            where = f"rule {r.get('record') or r.get('alert')}"
            check_names_exposed(self, metric_names(r['expr']), where, defined=recorded)
            for name, labels in selectors(r['expr']):
                check_labels_exposed(self, name, labels, where)

    def test_the_rule_tests_feed_series_shaped_like_the_collectors(self):
        need_yaml()
        with open(RULES_TEST) as f:
            tests = yaml.safe_load(f)['tests']
        for t in tests:
            for s in t['input_series']:
                ((name, labels),) = selectors(s['series'])
                check_names_exposed(self, {name}, 'cuflight.rules.test.yml')
                check_labels_exposed(self, name, labels, 'cuflight.rules.test.yml')
                self.assertLessEqual(TARGET_LABELS, labels,
                                     f'{s["series"]}: scraped series carry instance and job')


def dashboard_expressions():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = []

    def walk(panels):
        for p in panels:
            for t in p.get('targets', []):
                exprs.append((p['title'], t['expr']))
            walk(p.get('panels', []))

    walk(dash['panels'])
    variables = []
    for v in dash.get('templating', {}).get('list', []):
        q = v.get('query')
        text = q.get('query') if isinstance(q, dict) else q
        m = re.match(r'\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)', text or '')
        if v.get('type') == 'query':
            assert m, f'variable {v["name"]}: not a label_values() query: {text}'
            variables.append((v['name'], m.group(1)))
    return exprs, variables


class Dashboard(unittest.TestCase):
    def test_it_covers_what_an_operator_looks_at(self):
        exprs, _ = dashboard_expressions()
        titles = {t for t, _ in exprs}
        for wanted in ('GPU time by kernel occupancy', 'GPU time by limiting resource',
                       'Top kernels by GPU time', 'Events dropped by producers', 'Collectors'):
            self.assertIn(wanted, titles)
        self.assertGreaterEqual(len(exprs), 20)

    def test_every_expression_parses(self):
        promtool = tool('promtool', 'prometheus')
        exprs, _ = dashboard_expressions()
        rules = {'groups': [{'name': 'dashboard', 'rules': [
            {'record': f'dashboard:expression_{i}', 'expr': grafana_to_promql(e)}
            for i, (_, e) in enumerate(exprs)]}]}
        with tempfile.NamedTemporaryFile('w', suffix='.yml') as f:
            json.dump(rules, f)  # JSON is YAML
            f.flush()
            r = run([promtool, 'check', 'rules', f.name])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f'SUCCESS: {len(exprs)} rules found', r.stdout)

    def test_every_series_it_names_is_one_the_collector_exposes(self):
        exprs, variables = dashboard_expressions()
        for title, e in exprs:
            e = grafana_to_promql(e)
            self.assertTrue(metric_names(e), f'{title}: names no series: {e}')
            check_names_exposed(self, metric_names(e), f'panel "{title}"')
            for name, labels in selectors(e):
                check_labels_exposed(self, name, labels, f'panel "{title}"')
        for name, metric in variables:
            check_names_exposed(self, {metric}, f'variable ${name}')


def main():
    names = sys.argv[1:]
    loader = unittest.TestLoader()
    module = sys.modules[__name__]
    suite = (loader.loadTestsFromNames(names, module) if names
             else loader.loadTestsFromModule(module))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if FedCollector._instance is not None:
        FedCollector._instance.stop()
    if not result.wasSuccessful():
        return 1
    return 77 if result.testsRun > 0 and len(result.skipped) == result.testsRun else 0


if __name__ == '__main__':
    sys.exit(main())
