#!/usr/bin/env python3
"""Tests of deploy/: what an operator installs, checked with the real tools and the real collector.

  SystemdUnit     systemd-analyze verify of the unit and of the injection drop-in (no warning),
                  its sandboxing score (systemd-analyze security --offline), the sysusers file
                  (systemd-sysusers --dry-run), the job environment scripts
  CollectorFlags  every flag of the unit's ExecStart and of the Kubernetes DaemonSet is one that
                  `cuflight-collector --help` lists, and the real collector starts with them
                  (paths, group and ports moved into a temporary directory)
  Manifests       the Kubernetes pod example agrees with the DaemonSet (socket, library, uid,
                  group, volumes); it starts on a node where the DaemonSet has not run (no
                  hostPath the kubelet requires to exist); the Kyverno policy adds exactly the
                  example's parts and allows only its host paths; the NetworkPolicy selects the
                  collectors and lets only Prometheus's pods reach the metrics port
  PodWithoutDaemonSet
                  the pod example on a node in the states the DaemonSet may leave it in (never
                  reached, rebooted, running), its hostPath volumes made as the kubelet makes
                  them, the real injected library loaded through the pod's own variables (by the
                  fake driver and CUPTI of tests/inject): the pod starts every time, runs
                  unrecorded with one line on stderr when it ends before the collector is there,
                  and is recorded once it is, also when it started first
  WebConfig       the real collector with --web-config: a scrape without credentials or with
                  wrong ones is refused (401), with the right ones answered (200), for bcrypt
                  hashes from Prometheus's and Varnish's documentation; with TLS it speaks HTTPS
                  only, and with client certificates required only to clients the CA signed
                  (certificates made by openssl in the test); a real Prometheus scrapes it over
                  HTTPS with the right password and is refused with a wrong one; a bad file is
                  one line on stderr and exit status 2; the example passes promtool check
                  web-config
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
import urllib.parse
import urllib.request

try:
    import yaml
except ImportError:  # scripts/setup --tests installs python3-yaml
    yaml = None

SOURCE_DIR = os.environ.get(
    'CUFLIGHT_SOURCE_DIR', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
DEPLOY = os.path.join(SOURCE_DIR, 'deploy')
COLLECTOR = os.environ.get('CUFLIGHT_COLLECTOR_BIN', '')
FEED = os.environ.get('CUFLIGHT_FEED_COLLECTOR', '')
INJECT_SO = os.environ.get('CUFLIGHT_INJECT_SO', '')
FAKE_APP = os.environ.get('CUFLIGHT_FAKE_APP', '')
FAKE_LIBCUPTI = os.environ.get('CUFLIGHT_FAKE_LIBCUPTI', '')
FAKE_LIBCUDA_DIR = os.environ.get('CUFLIGHT_FAKE_LIBCUDA_DIR', '')

UNIT = os.path.join(DEPLOY, 'systemd', 'cuflight-collector.service')
DAEMONSET = os.path.join(DEPLOY, 'kubernetes', 'cuflight-collector.yaml')
POD = os.path.join(DEPLOY, 'kubernetes', 'gpu-pod-example.yaml')
NETWORK_POLICY = os.path.join(DEPLOY, 'kubernetes', 'networkpolicy.yaml')
KYVERNO = os.path.join(DEPLOY, 'kubernetes', 'kyverno-inject-policy.yaml')
WEB_CONFIG_EXAMPLE = os.path.join(DEPLOY, 'prometheus', 'web-config.example.yml')
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
    # and GPU. Exported only while such a kernel exists, which a fed collector never has. Its
    # labels: docs/metrics.md.
    'cuflight_kernel_oldest_unfinished_seconds': {
        'hostname', 'pid', 'exe', 'stream', 'UUID', 'pci_bus_id', 'modelName', 'hpc_job',
        'namespace', 'pod', 'container', 'instance', 'job'},
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
        raise unittest.SkipTest(f'{name} is not installed (Debian package {package}; scripts/setup --tests '
                                f'installs it)')
    return path


def need_yaml():
    if yaml is None:
        raise AssertionError('python3-yaml is missing: run scripts/setup --tests')


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
             '--metrics', '127.0.0.1:0', '--reconnect-grace', '0',
             '--max-connections-per-uid', '2'],
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
            if not re.search(r'^cuflight_connections_refused_total\{reason="uid_connection_limit"\} [1-9]',
                             text, re.M):
                missing.append('a refused connection')
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
                                 'CUFLIGHT_COLLECTOR_UID', 'CUFLIGHT_TIMING'])
        # The fleet times kernels in windows only (docs/fleet.md).
        self.assertIn('CUFLIGHT_TIMING=sampled', assignments)
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
            self.assertEqual(env['CUFLIGHT_TIMING'], 'sampled')  # the fleet default
            pod_mounts = {m['mountPath']: pod_host[m['name']] for m in c['volumeMounts']}

            def on_host(path):
                d = os.path.dirname(path)
                self.assertIn(d, pod_mounts, f'{path} is not on a volume of the pod')
                return pod_mounts[d] + '/' + os.path.basename(path)

            self.assertEqual(on_host(env['CUFLIGHT_COLLECTOR']),
                             socket_host_dir + '/' + os.path.basename(flags['--socket']))
            self.assertEqual(on_host(env['CUDA_INJECTION64_PATH']), library_host)


    def test_the_pod_starts_where_the_daemonset_has_not_run(self):
        # Kubernetes, Volumes, hostPath: type Directory means "a directory must exist at the
        # given path" (the pod does not start until it does: a new node, /run after a reboot, a
        # node without the DaemonSet's label); DirectoryOrCreate: "if nothing exists at the given
        # path, an empty directory will be created there as needed". Every other type (File,
        # Socket, ...) requires the path to exist too, and "" leaves it to the container runtime.
        need_yaml()
        with open(POD) as f:
            pod = yaml.safe_load(f)
        self.check_hostpaths_never_block(pod['spec'], 'gpu-pod-example.yaml')

    def check_hostpaths_never_block(self, spec, where):
        host = {v['name']: v['hostPath'] for v in spec.get('volumes', []) if 'hostPath' in v}
        self.assertTrue(host, f'{where}: no hostPath volume (nothing checked)')
        for name, hp in host.items():
            self.assertEqual(hp.get('type'), 'DirectoryOrCreate',
                             f'{where}: hostPath {hp["path"]} has type {hp.get("type")!r}: a pod '
                             f'on a node without it would not start (use DirectoryOrCreate)')
        for c in spec['containers']:
            for m in c.get('volumeMounts', []):
                if m['name'] in host:
                    self.assertTrue(m.get('readOnly'),
                                    f'{where}: {c.get("name", "a container")} mounts {m["mountPath"]} writable')

    def test_the_kyverno_policy_adds_the_examples_parts_and_allows_only_them(self):
        need_yaml()
        with open(POD) as f:
            pod = yaml.safe_load(f)
        with open(KYVERNO) as f:
            policies = {d['metadata']['name']: d for d in yaml.safe_load_all(f) if d}
        self.assertEqual(set(policies), {'cuflight-inject', 'cuflight-hostpath-only'})
        for d in policies.values():
            self.assertEqual((d['apiVersion'], d['kind']), ('kyverno.io/v1', 'ClusterPolicy'))
        (rule,) = policies['cuflight-inject']['spec']['rules']
        (kinds,) = [r['resources']['kinds'] for r in rule['match']['any']]
        self.assertEqual(kinds, ['Pod'])
        patch = rule['mutate']['patchStrategicMerge']['spec']
        self.assertEqual(patch['securityContext']['+(supplementalGroups)'],
                         pod['spec']['securityContext']['supplementalGroups'])
        (container,) = patch['containers']
        self.assertEqual(container['(name)'], '*', 'the patch applies to every container')
        (app,) = pod['spec']['containers']
        # The downward API's variables (POD_NAME, ...) are the example's, not the policy's: a
        # strategic merge by name would replace an application's own variable of that name.
        self.assertEqual(container['env'], [e for e in app['env'] if 'valueFrom' not in e])
        self.assertEqual(container['volumeMounts'], app['volumeMounts'])
        self.assertEqual(patch['volumes'], pod['spec']['volumes'])
        self.check_hostpaths_never_block({'volumes': patch['volumes'], 'containers': [container]},
                                         'kyverno-inject-policy.yaml')

        (check,) = policies['cuflight-hostpath-only']['spec']['rules']
        self.assertEqual(policies['cuflight-hostpath-only']['spec']['validationFailureAction'],
                         'Enforce')
        (volume_pattern,) = check['validate']['pattern']['spec']['=(volumes)']
        allowed = {p.strip() for p in volume_pattern['=(hostPath)']['path'].split('|')}
        self.assertEqual(allowed, {v['hostPath']['path'] for v in pod['spec']['volumes']})

    def test_the_network_policy_lets_only_prometheus_reach_the_metrics(self):
        need_yaml()
        (args, collector), = daemonset_collector_args()
        metrics_port = int(dict(split_flags(args))['--metrics'].rsplit(':', 1)[1])
        with open(DAEMONSET) as f:
            ds = next(d for d in yaml.safe_load_all(f) if d and d.get('kind') == 'DaemonSet')
        pod_labels = ds['spec']['template']['metadata']['labels']
        with open(NETWORK_POLICY) as f:
            (policy,) = [d for d in yaml.safe_load_all(f) if d]
        self.assertEqual((policy['apiVersion'], policy['kind']),
                         ('networking.k8s.io/v1', 'NetworkPolicy'))
        self.assertEqual(policy['metadata']['namespace'], ds['metadata']['namespace'])
        spec = policy['spec']
        # matchLabels select a pod when each of them is among its labels.
        self.assertLessEqual(spec['podSelector']['matchLabels'].items(), pod_labels.items())
        self.assertIn('Ingress', spec['policyTypes'])
        # Egress listed with no rule: the collector may open no connection.
        self.assertIn('Egress', spec['policyTypes'])
        self.assertEqual(spec.get('egress'), [])
        self.assertTrue(spec['ingress'])
        for rule in spec['ingress']:
            self.assertEqual(rule['ports'], [{'protocol': 'TCP', 'port': metrics_port}])
            self.assertTrue(rule['from'], 'a rule without "from" admits every peer')
            for peer in rule['from']:
                # Both selectors in one peer: these pods of that namespace. One alone would admit
                # every pod of the namespace, or such pods in every namespace.
                self.assertIn('namespaceSelector', peer)
                self.assertIn('podSelector', peer)
                self.assertTrue(peer['namespaceSelector'].get('matchLabels'))
                self.assertTrue(peer['podSelector'].get('matchLabels'))
        self.assertEqual([p['containerPort'] for p in collector['ports']], [metrics_port])

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


class PodWithoutDaemonSet(unittest.TestCase):
    """gpu-pod-example.yaml on a node in a temporary directory. Its hostPath volumes are made as
    the kubelet makes them (Kubernetes, Volumes, hostPath: DirectoryOrCreate creates an empty
    directory, mode 0755, where nothing exists; Directory requires one, or the pod does not
    start); the DaemonSet's part (the library its init container installs, the collector on its
    socket) is there or not. The application is tests/inject's fake_app, which loads the library
    named by the pod's CUDA_INJECTION64_PATH as the driver does (dlopen, InitializeInjection) and
    launches through the fake CUPTI: what the real driver does with a missing library is item 15
    of docs/gpu-verification.md, not this test's."""

    LAUNCHES = 3
    # A launch as stored: a `launch` line after its configuration's `kernel_config` (the
    # library's default, docs/protocol.md "Interned configurations"), or a whole `kernel` line.
    LAUNCH_TYPES = ('launch', 'kernel')

    def setUp(self):
        need_yaml()
        for name, value in [('CUFLIGHT_COLLECTOR_BIN', COLLECTOR),
                            ('CUFLIGHT_INJECT_SO', INJECT_SO), ('CUFLIGHT_FAKE_APP', FAKE_APP),
                            ('CUFLIGHT_FAKE_LIBCUPTI', FAKE_LIBCUPTI)]:
            if not value or not os.path.exists(value):
                raise unittest.SkipTest(f'{name} is not set to a built file (CTest sets it when '
                                        f'the injector and tests/inject are built)')
        self.node = tempfile.mkdtemp(prefix='cuflight-node-')
        os.chmod(self.node, 0o700)
        self.addCleanup(shutil.rmtree, self.node, True)
        with open(POD) as f:
            self.pod = yaml.safe_load(f)
        (self.container,) = self.pod['spec']['containers']

    def on_node(self, path):
        return os.path.join(self.node, path.lstrip('/'))

    def start_pod(self):
        """The kubelet's part: each hostPath volume made or checked; returns the container's
        mount paths mapped to the node's directories."""
        host = {}
        for v in self.pod['spec']['volumes']:
            hp = v['hostPath']
            path = self.on_node(hp['path'])
            if hp.get('type') == 'DirectoryOrCreate':
                if not os.path.exists(path):
                    os.makedirs(path)
                    os.chmod(path, 0o755)
            elif hp.get('type') == 'Directory':
                self.assertTrue(os.path.isdir(path), f'the pod does not start: hostPath '
                                                     f'{hp["path"]} (type Directory) is missing')
            else:
                self.fail(f'hostPath type {hp.get("type")!r} is not emulated here')
            host[v['name']] = path
        return {m['mountPath']: host[m['name']] for m in self.container['volumeMounts']}

    def pod_environment(self, mounts):
        env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
               'LD_LIBRARY_PATH': FAKE_LIBCUDA_DIR, 'CUFLIGHT_CUPTI_PATH': FAKE_LIBCUPTI}
        # The downward API's fields, as the kubelet fills them for this pod.
        downward = {'metadata.name': 'gpu-pod-example', 'metadata.namespace': 'default',
                    'metadata.uid': '6b1a4c2e-9d3f-4e5a-8b7c-0d1e2f3a4b5c'}
        for e in self.container['env']:
            if 'valueFrom' in e:
                env[e['name']] = downward[e['valueFrom']['fieldRef']['fieldPath']]
                continue
            value = e['value']
            for mount_path, node_path in mounts.items():
                if value.startswith(mount_path + '/'):
                    value = node_path + value[len(mount_path):]
            env[e['name']] = value
        return env

    def daemonset(self):
        with open(DAEMONSET) as f:
            ds = next(d for d in yaml.safe_load_all(f) if d and d.get('kind') == 'DaemonSet')
        spec = ds['spec']['template']['spec']
        return spec, {v['name']: v['hostPath']['path'] for v in spec['volumes']}

    def install_library(self):
        """The DaemonSet init container's copy, to the path its script names."""
        spec, host = self.daemonset()
        init = spec['initContainers'][0]
        init_mounts = {m['mountPath']: host[m['name']] for m in init['volumeMounts']}
        target = re.search(r'mv -f \S+ (\S+)', ' '.join(init['args'])).group(1)
        path = self.on_node(init_mounts[os.path.dirname(target)] + '/' + os.path.basename(target))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(INJECT_SO, path)
        os.chmod(path, 0o644)

    def collector_socket(self):
        """Where the DaemonSet's collector listens, on the node."""
        spec, host = self.daemonset()
        ((args, collector),) = daemonset_collector_args()
        socket_path = dict(split_flags(args))['--socket']
        mounts = {m['mountPath']: host[m['name']] for m in collector['volumeMounts']}
        return self.on_node(mounts[os.path.dirname(socket_path)] + '/' +
                            os.path.basename(socket_path))

    def run_app(self, env):
        return run([FAKE_APP, env['CUDA_INJECTION64_PATH'], str(self.LAUNCHES)], env=env)

    def test_a_node_the_daemonset_never_reached_starts_the_pod(self):
        mounts = self.start_pod()
        env = self.pod_environment(mounts)
        for path in mounts.values():
            self.assertTrue(os.path.isdir(path))
        # Nothing to load: the driver's part (docs/gpu-verification.md, item 15).
        self.assertFalse(os.path.exists(env['CUDA_INJECTION64_PATH']))

    def test_after_a_reboot_the_pod_runs_unrecorded_with_one_line(self):
        self.install_library()  # /opt survives a reboot; /run (a tmpfs) does not
        env = self.pod_environment(self.start_pod())
        self.assertFalse(os.path.exists(env['CUFLIGHT_COLLECTOR']))
        r = self.run_app(env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f'fired={self.LAUNCHES}', r.stdout)
        self.assertEqual(r.stderr.count('\n'), 1, r.stderr)
        self.assertIn(env['CUFLIGHT_COLLECTOR'], r.stderr)

    def start_collector(self, sock):
        """The DaemonSet's collector on the node; stopped (SIGTERM) at the test's end. Returns
        its log directory."""
        os.makedirs(os.path.dirname(sock), mode=0o750, exist_ok=True)
        logs = os.path.join(self.node, 'var', 'log', 'cuflight')
        out = open(os.path.join(self.node, 'collector.out'), 'w+')
        self.addCleanup(out.close)
        collector = subprocess.Popen([COLLECTOR, '--socket', sock, '--log-dir', logs],
                                     stdout=out, stderr=subprocess.STDOUT)

        def stop():
            collector.send_signal(signal.SIGTERM)
            collector.wait(timeout=30)
        self.addCleanup(stop)
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            self.assertIsNone(collector.poll(), 'the collector exited')
            self.assertLess(time.monotonic(), deadline, 'no socket')
            time.sleep(0.05)
        return logs

    @staticmethod
    def stored(logs, event_types, expected):
        """How many complete lines of the types `event_types` the logs hold, read again until
        there are `expected` (for at most 30 s)."""
        deadline = time.monotonic() + 30
        while True:
            count = 0
            for directory, _, files in os.walk(logs):
                for name in files:
                    if name.endswith('.jsonl'):
                        with open(os.path.join(directory, name)) as f:
                            count += sum(json.loads(l)['type'] in event_types
                                         for l in f if l.endswith('\n'))
            if count >= expected or time.monotonic() > deadline:
                return count
            time.sleep(0.1)

    def test_with_the_collector_running_the_pod_is_recorded(self):
        # The DaemonSet first: the library, then the collector on its socket; then the pod.
        self.install_library()
        sock = self.collector_socket()
        logs = self.start_collector(sock)
        env = self.pod_environment(self.start_pod())
        self.assertEqual(env['CUFLIGHT_COLLECTOR'], sock)
        r = self.run_app(env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn(f'fired={self.LAUNCHES}', r.stdout)
        self.assertEqual(r.stderr, '', 'a recorded pod prints nothing')
        self.assertEqual(self.stored(logs, self.LAUNCH_TYPES, self.LAUNCHES), self.LAUNCHES)

    def test_a_pod_that_started_first_is_recorded_once_the_collector_is_up(self):
        # After a reboot the pod may start before the DaemonSet's pod: its launches are kept
        # and sent when the collector comes (the library retries within its 1 s backoff).
        self.install_library()
        env = self.pod_environment(self.start_pod())
        with open(os.path.join(self.node, 'app.out'), 'w+') as out:
            app = subprocess.Popen([FAKE_APP, env['CUDA_INJECTION64_PATH'], str(self.LAUNCHES),
                                    'sleep', '5000'], env=env, stdout=out,
                                   stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 30
            while f'fired={self.LAUNCHES}' not in open(out.name).read():
                self.assertIsNone(app.poll(), 'the app exited before its launches')
                self.assertLess(time.monotonic(), deadline, 'no launches')
                time.sleep(0.05)
            logs = self.start_collector(self.collector_socket())
            _, err = app.communicate(timeout=60)
        self.assertEqual(app.returncode, 0, err)
        self.assertEqual(err, '', 'nothing was lost: nothing to say')
        self.assertEqual(self.stored(logs, self.LAUNCH_TYPES, self.LAUNCHES), self.LAUNCHES)

# Bcrypt hashes with their passwords, from documentation independent of this code: Prometheus's
# basic-auth guide (https://prometheus.io/docs/guides/basic-auth/: "$2b$12$hNf2...", the password
# "test") and Varnish's basic authentication page
# (https://docs.varnish-software.com/policy-engine/auth/basic/: foo's "$2y$05$j0wk...", "key1").
PROMETHEUS_GUIDE_HASH = '$2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay'
VARNISH_FOO_HASH = '$2y$05$j0wkwHcoF8LUkm4crmVEruzsGJpT/VpoUJZWc3A7YQi7XPzG2C0li'


class WebConfig(unittest.TestCase):
    def setUp(self):
        if not os.access(COLLECTOR, os.X_OK):
            raise AssertionError('set CUFLIGHT_COLLECTOR_BIN to the built cuflight-collector')
        self.tmp = tempfile.mkdtemp(prefix='cuflight-webconfig-')
        os.chmod(self.tmp, 0o700)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, text, name='web.yml'):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def collector_args(self, web_config, metrics='127.0.0.1:0'):
        args = [COLLECTOR, '--socket', os.path.join(self.tmp, 'run', 'c.sock'),
                '--log-dir', os.path.join(self.tmp, 'logs')]
        if metrics:
            args += ['--metrics', metrics]
        return args + ['--web-config', web_config]

    def start(self, web_config):
        out = open(os.path.join(self.tmp, 'out'), 'w+')
        self.addCleanup(out.close)
        p = subprocess.Popen(self.collector_args(web_config), stdout=out,
                             stderr=subprocess.STDOUT)

        def stop():
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
        self.addCleanup(stop)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out.seek(0)
            m = re.search(r'metrics at https?://127\.0\.0\.1:(\d+)/metrics', out.read())
            if m:
                return int(m.group(1))
            self.assertIsNone(p.poll(), 'the collector exited')
            time.sleep(0.05)
        self.fail('the collector did not serve metrics')

    @staticmethod
    def get(port, path, authorization=None, tls=None):
        """(status, headers, body) of GET path, asked again while the answer is 429 (password
        checks throttled: the collector says when to come back), for at most 60 s. `tls`: an
        ssl.SSLContext to speak HTTPS with."""
        deadline = time.monotonic() + 60
        while True:
            data = WebConfig.exchange(port, path, authorization, tls)
            head, _, body = data.partition(b'\r\n\r\n')
            lines = head.decode().split('\r\n')
            status = int(lines[0].split()[1])
            headers = {k.strip().lower(): v.strip()
                       for k, v in (l.split(':', 1) for l in lines[1:])}
            if status != 429 or time.monotonic() > deadline:
                return status, headers, body.decode()
            time.sleep(float(headers.get('retry-after', '1')))

    @staticmethod
    def exchange(port, path, authorization=None, tls=None):
        """The bytes answered to one GET (until the server closes)."""
        with socket.create_connection(('127.0.0.1', port), timeout=30) as raw:
            s = tls.wrap_socket(raw, server_hostname='127.0.0.1') if tls else raw
            request = f'GET {path} HTTP/1.1\r\nHost: cuflight\r\n'
            if authorization is not None:
                request += f'Authorization: {authorization}\r\n'
            s.sendall((request + '\r\n').encode())
            data = b''
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk

    @staticmethod
    def refused(port, path, tls):
        """True when the server ends the connection without an HTTP answer (a failed TLS
        handshake: the client sees an alert, a reset or end of stream)."""
        import ssl
        try:
            return not WebConfig.exchange(port, path, tls=tls).startswith(b'HTTP/')
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True

    @staticmethod
    def basic(user, password):
        import base64
        return 'Basic ' + base64.b64encode(f'{user}:{password}'.encode()).decode()

    def test_scrapes_need_the_right_credentials(self):
        port = self.start(self.write(
            f'basic_auth_users:\n  admin: {PROMETHEUS_GUIDE_HASH}\n'
            f'  "foo": \'{VARNISH_FOO_HASH}\'\n'))
        status, headers, _ = self.get(port, '/metrics')
        self.assertEqual(status, 401)
        self.assertTrue(headers.get('www-authenticate', '').startswith('Basic realm='), headers)
        for who, authorization in [
                ('a wrong password', self.basic('admin', 'wrong')),
                ('another user\'s password', self.basic('admin', 'key1')),
                ('an unknown user', self.basic('nobody', 'test')),
                ('a password with a NUL byte after the right one', self.basic('admin', 'test\0x')),
                ('no password', 'Basic ' + 'YWRtaW4='),  # base64("admin"): no colon
                ('bad base64', 'Basic !!!!'),
                ('another scheme', 'Bearer dGVzdA==')]:
            self.assertEqual(self.get(port, '/metrics', authorization)[0], 401, who)
        for user, password in [('admin', 'test'), ('foo', 'key1')]:
            status, headers, body = self.get(port, '/metrics', self.basic(user, password))
            self.assertEqual(status, 200, f'{user}: {body[:200]}')
            self.assertIn('cuflight_', body)
            # Known now: the same credentials are let in again; others still are not.
            self.assertEqual(self.get(port, '/metrics', self.basic(user, password))[0], 200)
            self.assertEqual(self.get(port, '/metrics', self.basic(user, password + 'x'))[0], 401)
        self.assertEqual(self.get(port, '/')[0], 401, 'every path but /healthz needs credentials')
        status, _, body = self.get(port, '/healthz')
        self.assertEqual((status, body), (200, 'ok\n'))

    def test_a_bad_web_config_is_one_line_and_exit_status_2(self):
        shaped_like_bcrypt = '$2b$15$' + 'a' * 53  # the shape of a hash, at cost 15
        cases = [
            ('not YAML', 'basic_auth_users: [unclosed\n', 'not YAML'),
            ('an unknown key', f'basic_auth_user:\n  a: {VARNISH_FOO_HASH}\n', 'unknown key'),
            ('a plain password', 'basic_auth_users:\n  a: secret\n', 'not a bcrypt hash'),
            ('a SHA-512 crypt hash', 'basic_auth_users:\n  a: $6$salt$' + 'b' * 86 + '\n',
             'not a bcrypt hash'),
            ('a cost above the limit', f'basic_auth_users:\n  a: {shaped_like_bcrypt}\n',
             'bcrypt cost 15'),
            ('a colon in a user name', f'basic_auth_users:\n  "a:b": {VARNISH_FOO_HASH}\n',
             "holds ':'"),
            ('a user twice', f'basic_auth_users:\n  a: {VARNISH_FOO_HASH}\n'
                             f'  a: {VARNISH_FOO_HASH}\n', 'appears twice'),
            ('no user', 'basic_auth_users:\n', 'no basic_auth_users'),
            ('an empty file', '', 'no basic_auth_users'),
            ('an empty TLS section', 'tls_server_config: {}\n', 'no basic_auth_users'),
            ('a list', '- a\n', 'not a mapping'),
            ('two documents', f'basic_auth_users:\n  a: {VARNISH_FOO_HASH}\n---\nb: 1\n',
             'more than one YAML document'),
            ('response headers', f'http_server_config:\n  headers:\n    X-A: b\n'
                                 f'basic_auth_users:\n  a: {VARNISH_FOO_HASH}\n', 'headers'),
        ]
        for what, text, expected in cases:
            path = self.write(text)
            r = run(self.collector_args(path))
            self.assertEqual(r.returncode, 2, f'{what}: {r.stderr}')
            self.assertEqual(r.stdout, '', what)
            self.assertEqual(r.stderr.count('\n'), 1, f'{what}: {r.stderr!r}')
            self.assertTrue(r.stderr.startswith('cuflight-collector: --web-config '),
                            f'{what}: {r.stderr!r}')
            self.assertIn(expected, r.stderr, what)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, 'run')),
                             f'{what}: the collector started before refusing its web config')
        for what, args, expected in [
                ('a missing file', self.collector_args(os.path.join(self.tmp, 'none.yml')),
                 'cannot read'),
                ('no --metrics', self.collector_args(self.write(
                    f'basic_auth_users:\n  a: {VARNISH_FOO_HASH}\n'), metrics=None), '--metrics')]:
            r = run(args)
            self.assertEqual((r.returncode, r.stderr.count('\n')), (2, 1), f'{what}: {r.stderr}')
            self.assertIn(expected, r.stderr, what)

    def openssl(self, *args):
        r = run([tool('openssl', 'openssl')] + list(args), cwd=self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)

    def make_certificates(self):
        """In self.tmp: server.pem/server.key (127.0.0.1), ca.pem, client.pem/.key signed by the
        CA, stranger.pem/.key self-signed (P-256 keys, one day)."""
        ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1']
        self.openssl('req', '-x509', *ec, '-keyout', 'server.key', '-out', 'server.pem',
                     '-subj', '/CN=cuflight-collector', '-addext', 'subjectAltName=IP:127.0.0.1')
        self.openssl('req', '-x509', *ec, '-keyout', 'ca.key', '-out', 'ca.pem',
                     '-subj', '/CN=cuflight test CA')
        self.openssl('req', *ec[:-2], '-keyout', 'client.key', '-out', 'client.csr',
                     '-subj', '/CN=prometheus')
        self.openssl('x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key',
                     '-CAcreateserial', '-days', '1', '-out', 'client.pem')
        self.openssl('req', '-x509', *ec, '-keyout', 'stranger.key', '-out', 'stranger.pem',
                     '-subj', '/CN=prometheus')

    def client_context(self, cert=None):
        import ssl
        context = ssl.create_default_context(cafile=os.path.join(self.tmp, 'server.pem'))
        if cert is not None:
            context.load_cert_chain(os.path.join(self.tmp, cert + '.pem'),
                                    os.path.join(self.tmp, cert + '.key'))
        return context

    def test_tls_serves_https_only(self):
        self.make_certificates()
        # Relative names: from the web config's directory (the collector runs elsewhere).
        port = self.start(self.write(
            'tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n'
            f'basic_auth_users:\n  foo: {VARNISH_FOO_HASH}\n'))
        tls = self.client_context()
        status, _, body = self.get(port, '/metrics', self.basic('foo', 'key1'), tls=tls)
        self.assertEqual(status, 200, body[:200])
        self.assertIn('cuflight_', body)
        self.assertEqual(self.get(port, '/metrics', tls=tls)[0], 401)
        self.assertEqual(self.get(port, '/healthz', tls=tls)[0], 200)
        # Plain HTTP gets no HTTP answer, and the endpoint goes on serving HTTPS.
        self.assertTrue(self.refused(port, '/healthz', None))
        self.assertEqual(self.get(port, '/metrics', self.basic('foo', 'key1'), tls=tls)[0], 200)

    def test_client_certificates_signed_by_the_ca_only(self):
        self.make_certificates()
        port = self.start(self.write(
            f'tls_server_config:\n  cert_file: {self.tmp}/server.pem\n'
            f'  key_file: {self.tmp}/server.key\n  client_ca_file: ca.pem\n'
            '  client_auth_type: RequireAndVerifyClientCert\n  min_version: TLS13\n'))
        status, _, body = self.get(port, '/metrics', tls=self.client_context('client'))
        self.assertEqual(status, 200, body[:200])
        self.assertTrue(self.refused(port, '/metrics', self.client_context()), 'no certificate')
        self.assertTrue(self.refused(port, '/metrics', self.client_context('stranger')),
                        'a certificate the CA did not sign')
        self.assertEqual(self.get(port, '/metrics', tls=self.client_context('client'))[0], 200)

    def test_prometheus_scrapes_it_with_its_credentials_and_ca(self):
        prometheus = tool('prometheus', 'prometheus')
        need_yaml()
        self.make_certificates()
        port = self.start(self.write(
            'tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n'
            f'basic_auth_users:\n  foo: {VARNISH_FOO_HASH}\n'))
        # Two jobs, as an operator writes them (docs/collector.md, "Metrics endpoint"): one with
        # the right password, one with a wrong one.
        jobs = []
        for job, password in [('right', 'key1'), ('wrong', 'key2')]:
            jobs.append({'job_name': job, 'scheme': 'https',
                         'tls_config': {'ca_file': os.path.join(self.tmp, 'server.pem')},
                         'basic_auth': {'username': 'foo', 'password': password},
                         'static_configs': [{'targets': [f'127.0.0.1:{port}']}]})
        config = self.write(yaml.safe_dump({
            'global': {'scrape_interval': '1s', 'scrape_timeout': '1s'},
            'scrape_configs': jobs}), 'prometheus.yml')
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            api_port = s.getsockname()[1]
        log = open(os.path.join(self.tmp, 'prometheus.log'), 'w+')
        self.addCleanup(log.close)
        p = subprocess.Popen([prometheus, '--config.file=' + config,
                              '--storage.tsdb.path=' + os.path.join(self.tmp, 'tsdb'),
                              f'--web.listen-address=127.0.0.1:{api_port}'],
                             stdout=log, stderr=subprocess.STDOUT)

        def stop():
            p.terminate()
            p.wait(timeout=30)
        self.addCleanup(stop)

        def query(q):
            url = (f'http://127.0.0.1:{api_port}/api/v1/query?query=' +
                   urllib.parse.quote(q))
            with urllib.request.urlopen(url, timeout=10) as r:
                return {m['metric'].get('job'): float(m['value'][1])
                        for m in json.load(r)['data']['result']}

        deadline = time.monotonic() + 90
        up = {}
        while time.monotonic() < deadline:
            self.assertIsNone(p.poll(), 'Prometheus exited')
            try:
                up = query('up')
            except OSError:
                up = {}
            # The right job's first scrape may meet the throttle (429) the wrong one's checks set
            # off: it is up at a later one.
            if up == {'right': 1.0, 'wrong': 0.0}:
                break
            time.sleep(0.5)
        log.seek(0)
        self.assertEqual(up, {'right': 1.0, 'wrong': 0.0}, log.read()[-3000:])
        scraped = query('count by (job) ({__name__=~"cuflight_.+"})')
        self.assertGreater(scraped.get('right', 0), 0)
        self.assertNotIn('wrong', scraped)

    def test_bad_tls_settings_are_one_line_and_exit_status_2(self):
        self.make_certificates()
        users = f'basic_auth_users:\n  a: {VARNISH_FOO_HASH}\n'
        pair = '  cert_file: server.pem\n  key_file: server.key\n'
        cases = [
            ('a missing certificate', 'tls_server_config:\n  cert_file: none.pem\n'
                                      '  key_file: server.key\n', "cert_file '"),
            ('the key of another certificate', 'tls_server_config:\n  cert_file: server.pem\n'
                                               '  key_file: ca.key\n', "key_file '"),
            ('no key', 'tls_server_config:\n  cert_file: server.pem\n', 'needs both'),
            ('an unverified client mode',
             f'tls_server_config:\n{pair}  client_ca_file: ca.pem\n'
             '  client_auth_type: RequireAnyClientCert\n', 'nobody verified'),
            ('client verification without a CA',
             f'tls_server_config:\n{pair}  client_auth_type: RequireAndVerifyClientCert\n',
             'client_ca_file, which is missing'),
            ('TLS 1.1', f'tls_server_config:\n{pair}  min_version: TLS11\n', 'not TLS12 or TLS13'),
            ('min above max', f'tls_server_config:\n{pair}  min_version: TLS13\n'
                              '  max_version: TLS12\n', 'above max_version'),
            ('cipher suites', f'tls_server_config:\n{pair}  cipher_suites: [TLS_AES_128_GCM_SHA256]\n',
             'cipher_suites'),
            ('an inline certificate', 'tls_server_config:\n  cert: x\n  key: y\n', 'not supported'),
            ('a CA file that is not PEM', f'tls_server_config:\n{pair}  client_ca_file: server.key\n'
                                          '  client_auth_type: VerifyClientCertIfGiven\n',
             "client_ca_file '"),
        ]
        for what, text, expected in cases:
            r = run(self.collector_args(self.write(users + text)))
            self.assertEqual(r.returncode, 2, f'{what}: {r.stderr}')
            self.assertEqual(r.stderr.count('\n'), 1, f'{what}: {r.stderr!r}')
            self.assertTrue(r.stderr.startswith('cuflight-collector: --web-config '),
                            f'{what}: {r.stderr!r}')
            self.assertIn(expected, r.stderr, what)

    def test_the_example_passes_promtool_and_the_collector(self):
        r = run([tool('promtool', 'prometheus'), 'check', 'web-config', WEB_CONFIG_EXAMPLE])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        port = self.start(WEB_CONFIG_EXAMPLE)
        self.assertEqual(self.get(port, '/metrics', self.basic('prometheus', 'test'))[0], 200)


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
