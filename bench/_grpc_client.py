"""The measurement client of bench/reference.ts and bench/scale.ts (folder-private).

One Python gRPC client (Debian's python3-grpcio, gRPC's C core) drives both hosts, so the client adds
the same cost to each and is not the Deno process under test. The Deno script that starts it owns
the hosts (spawn, PSS, shutdown) and sends one JSON command per line on stdin; every reply is one
JSON line on stdout. Each measurement is timed here, with time.perf_counter(), so the command
channel adds nothing to a sample. Every outcome is checked: a failed cell stops the bench.

Usage: /usr/bin/python3 _grpc_client.py GENERATED_DIR (the directory protoc --python_out wrote)
"""

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc

sys.path.insert(0, sys.argv[1])
from codex.code_mode.v1 import code_mode_host_pb2 as pb  # noqa: E402

SERVICE = "/codex.code_mode.v1.CodeModeHost/"
CLIENT = 1  # OUTPUT_TRUNCATION_MODE_CLIENT
SERVER = 2  # OUTPUT_TRUNCATION_MODE_SERVER
OPTIONS = [
    ("grpc.max_receive_message_length", 67_108_864),
    ("grpc.max_send_message_length", 67_108_864),
]
ECHO = pb.ToolDefinition(name="echo", tool_name=pb.ToolName(name="echo"), description="", kind=1)
LARGE = 16 * 1024 * 1024


def now():
    return time.perf_counter()


class BenchError(Exception):
    pass


class Session:
    """An open session whose lease (the OpenSession stream) a thread reads, as a harness does."""

    def __init__(self, host, mode):
        self.host = host
        self.lease = host.open_session(pb.OpenSessionRequest(output_truncation=mode))
        first = next(self.lease)
        if not first.HasField("opened"):
            raise BenchError(f"OpenSession: first event is not `opened`: {first}")
        self.id = first.opened.session_id
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        try:
            for _ in self.lease:
                pass
        except grpc.RpcError:
            pass  # cancelled by close()

    def close(self):
        try:
            self.host.close_session(pb.CloseSessionRequest(session_id=self.id), timeout=30)
        except grpc.RpcError:
            pass
        self.lease.cancel()
        self.reader.join(5)


class Host:
    """One channel (one HTTP/2 connection, as Codex keeps) to a host, and the sessions the rows use."""

    def __init__(self, target):
        self.channel = grpc.insecure_channel(target, options=OPTIONS)
        c = self.channel

        def stream(name, req, resp):
            return c.unary_stream(SERVICE + name, req.SerializeToString, resp.FromString)

        def unary(name, req, resp):
            return c.unary_unary(SERVICE + name, req.SerializeToString, resp.FromString)

        self.open_session = stream("OpenSession", pb.OpenSessionRequest, pb.SessionEvent)
        self.close_session = unary("CloseSession", pb.CloseSessionRequest, pb.CloseSessionResponse)
        self.execute_call = stream("Execute", pb.ExecuteRequest, pb.ExecuteEvent)
        self.terminate = unary("Terminate", pb.TerminateRequest, pb.WaitResponse)
        self.subscribe = stream("SubscribeToToolCalls", pb.SubscribeToToolCallsRequest, pb.ToolCall)
        self.complete = unary("CompleteToolCall", pb.CompleteToolCallRequest, pb.CompleteToolCallResponse)
        self.executions = 0
        self.named = {}  # sessions kept for the rows, by name
        self.idle = []  # sessions of open_idle, with the value each stored
        self.subscriptions = []

    def session(self, name, mode=SERVER):
        if name not in self.named:
            self.named[name] = Session(self, mode)
            if name == "tools":
                self._answer_tools(self.named[name])
        return self.named[name]

    def _answer_tools(self, session):
        """SubscribeToToolCalls for the session; every call is completed with the JSON "ok"."""
        calls = self.subscribe(pb.SubscribeToToolCallsRequest(session_id=session.id))
        self.subscriptions.append(calls)

        def answer():
            try:
                for call in calls:
                    self.complete(pb.CompleteToolCallRequest(
                        session_id=session.id,
                        invocation_id=call.invocation_id,
                        succeeded=pb.ToolCallSucceeded(output_json=b'"ok"'),
                    ))
            except grpc.RpcError:
                pass  # cancelled at the end

        threading.Thread(target=answer, daemon=True).start()
        time.sleep(0.2)  # the subscription is registered before the first cell calls the tool

    def execute(self, session, source, **fields):
        """Runs one cell; returns (ms from the request to the outcome, the outcome, the cell id)."""
        self.executions += 1
        request = pb.ExecuteRequest(
            session_id=session.id,
            execution_id=f"bench-{self.executions}",
            tool_call_id="c",
            source=source,
            **fields,
        )
        start = now()
        took = None
        outcome = None
        cell_id = ""
        for event in self.execute_call(request, timeout=120):
            if event.HasField("started"):
                cell_id = event.started.cell_id
            elif event.HasField("outcome") and outcome is None:
                took = (now() - start) * 1000
                outcome = event.outcome
        if outcome is None:
            raise BenchError(f"Execute {source[:40]!r}: the stream ended without an outcome")
        return took, outcome, cell_id

    def close(self):
        for s in list(self.named.values()) + [s for s, _ in self.idle]:
            s.close()
        for calls in self.subscriptions:
            calls.cancel()
        self.channel.close()


def texts(outcome):
    return [item.text.text for item in outcome.content_items if item.HasField("text")]


def expect_completed(outcome, want, what):
    if outcome.WhichOneof("outcome") != "completed" or outcome.completed.HasField("error_text"):
        raise BenchError(f"{what}: not completed: {outcome}")
    got = texts(outcome)
    if want is not None and got != [want]:
        shown = [t[:40] + (f"… ({len(t)} chars)" if len(t) > 40 else "") for t in got]
        raise BenchError(f"{what}: expected text {want[:40]!r}, got {shown}")


def run_text(host, session, source='text("x")', want="x"):
    took, outcome, _ = host.execute(session, source)
    expect_completed(outcome, want, source)
    return took


def rate(host, sessions, seconds):
    """Back-to-back text("x") cells in each session, one thread per session, for `seconds`."""
    count = [0] * len(sessions)
    errors = []
    until = now() + seconds

    def loop(i, session):
        try:
            while now() < until:
                run_text(host, session)
                count[i] += 1
        except Exception as error:  # reported below
            errors.append(error)

    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = now()
    threads = [threading.Thread(target=loop, args=(i, s)) for i, s in enumerate(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = now() - start
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    if errors:
        raise errors[0]
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    # The client's own CPU share of the window: near 1.0 would mean the client is the bottleneck.
    return {"value": sum(count) / wall, "client_cpu": cpu / wall}


def measure(host, row, n):
    """One round's samples of a row on one host: {"samples": [ms...]} or {"value": x}."""
    samples = []
    if row == "b2b":
        s = host.session("main")
        for _ in range(n):
            samples.append(run_text(host, s))
    elif row == "rate1":
        return rate(host, [host.session("main")], n)
    elif row == "gap":
        s = host.session("main")
        for _ in range(n):
            time.sleep(0.1)
            samples.append(run_text(host, s))
    elif row == "store":
        s = host.session("store")
        for _ in range(n):
            host.counter = getattr(host, "counter", 0) + 1
            source = 'const v = (load("n") ?? 0) + 1; store("n", v); text(v)'
            samples.append(run_text(host, s, source, str(host.counter)))
    elif row == "tool":
        s = host.session("tools")
        for _ in range(n):
            took, outcome, _ = host.execute(s, "text(await tools.echo({}))", enabled_tools=[ECHO])
            expect_completed(outcome, "ok", "tool cell")
            samples.append(took)
    elif row == "large":
        s = host.session("client", CLIENT)
        for _ in range(n):
            time.sleep(0.2)
            took, outcome, _ = host.execute(s, f'text("x".repeat({LARGE}))')
            expect_completed(outcome, None, "16 MiB cell")
            if [len(t) for t in texts(outcome)] != [LARGE]:
                raise BenchError(f"16 MiB cell: text lengths {[len(t) for t in texts(outcome)]}")
            samples.append(took)
    elif row == "terminate":
        s = host.session("spin")
        for _ in range(n):
            _, outcome, cell_id = host.execute(s, "while (true) {}", yield_time_ms=100)
            if outcome.WhichOneof("outcome") != "yielded":
                raise BenchError(f"spinning cell: expected a yield, got {outcome}")
            start = now()
            response = host.terminate(pb.TerminateRequest(session_id=s.id, cell_id=cell_id), timeout=60)
            samples.append((now() - start) * 1000)
            if response.live_cell.WhichOneof("outcome") != "terminated":
                raise BenchError(f"Terminate: expected `terminated`, got {response}")
            time.sleep(0.5)  # a restarted runtime is up again before the other host's turn
    elif row == "open":
        for _ in range(n):
            time.sleep(0.3)
            start = now()
            s = Session(host, SERVER)
            samples.append((now() - start) * 1000)
            s.close()
    elif row == "first":
        for _ in range(n):
            time.sleep(0.3)
            start = now()
            s = Session(host, SERVER)
            took, outcome, _ = host.execute(s, 'text("x")')
            samples.append((now() - start) * 1000)
            expect_completed(outcome, "x", "first cell")
            s.close()
    elif row == "rate8":
        return rate(host, [host.session(f"par{i}") for i in range(8)], n)
    else:
        raise BenchError(f"unknown row {row}")
    return {"samples": samples}


def open_idle(host, n):
    """Opens n sessions back to back, each running `store("v", k); text("x")`; total wall ms."""
    start = now()
    for _ in range(n):
        s = Session(host, SERVER)
        k = len(host.idle)
        run_text(host, s, f'store("v", {k}); text("x")')
        host.idle.append((s, k))
    return {"ms": (now() - start) * 1000}


def turn_idle(host):
    """One more cell in every idle session, back to back: it loads the value its first cell stored."""
    start = now()
    for s, k in host.idle:
        run_text(host, s, 'text(load("v"))', str(k))
    return {"ms": (now() - start) * 1000}


def floor_idle(host):
    """The unary floor: a Terminate of a cell that does not exist in every idle session, back to back
    (each host answers it from its session table, with no runtime); total wall ms and the answer."""
    answers = set()
    start = now()
    for s, _ in host.idle:
        try:
            host.terminate(pb.TerminateRequest(session_id=s.id, cell_id="missing-cell"), timeout=60)
            answers.add("OK")
        except grpc.RpcError as error:
            answers.add(str(error.code()))
    return {"ms": (now() - start) * 1000, "answers": sorted(answers)}


def close_idle(host):
    for s, _ in host.idle:
        s.close()
    host.idle = []
    return {}


class StdioRelay:
    """A Unix socket whose one connection is relayed to a child's stdin and from its stdout: gRPC's
    C core cannot use pipes, so the client reaches a `--listen grpc+stdio://` host through this."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bench-relay-")
        self.path = os.path.join(self.dir, "host.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)

    def attach(self, proc):
        def accept():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed before a connection
            self.conn = conn

            def down():
                fd = proc.stdout.fileno()
                while True:
                    data = os.read(fd, 65536)
                    if not data:
                        break
                    try:
                        conn.sendall(data)
                    except OSError:
                        break
                try:
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

            threading.Thread(target=down, daemon=True).start()
            fd = proc.stdin.fileno()
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    break
                try:
                    os.write(fd, data)
                except OSError:
                    break
            try:
                proc.stdin.close()  # the connection's end: the host stops (stdin EOF)
            except OSError:
                pass

        threading.Thread(target=accept, daemon=True).start()

    def close(self):
        self.server.close()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass


def cold(argv, transport, cwd, stderr_path):
    """Spawns a host as Codex does, opens a session and runs text("x"): ms from the spawn to each
    step. `transport` is "stdio" (`--listen grpc+stdio://`, over the child's pipes) or "tcp"
    (`--listen grpc://127.0.0.1:0`, the endpoint read from its first stdout line)."""
    relay = StdioRelay() if transport == "stdio" else None
    with open(stderr_path, "ab") as stderr:
        start = now()
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
    phases = {}
    host = None
    try:
        if relay:
            relay.attach(proc)
            target = "unix:" + relay.path
        else:
            line = proc.stdout.readline().decode().strip()
            if not line.startswith("http://"):
                raise BenchError(f"{argv[0]}: expected an endpoint line, got {line!r}")
            phases["endpoint"] = (now() - start) * 1000
            target = line[len("http://"):]
        host = Host(target)
        s = Session(host, SERVER)
        phases["opened"] = (now() - start) * 1000
        _, outcome, _ = host.execute(s, 'text("x")')
        phases["outcome"] = (now() - start) * 1000
        expect_completed(outcome, "x", "cold first cell")
    finally:
        if host:
            host.close()
        if relay:
            relay.close()
        try:
            proc.stdin.close()
        except OSError:
            pass
        if transport == "tcp":
            proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return {"ms": phases["outcome"], "phases": phases, "pid": proc.pid}


def main():
    hosts = {}
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        try:
            if op == "connect":
                hosts[command["host"]] = Host(command["target"])
                reply = {}
            elif op == "disconnect":
                hosts.pop(command["host"]).close()
                reply = {}
            elif op == "measure":
                reply = measure(hosts[command["host"]], command["row"], command["n"])
            elif op == "open_idle":
                reply = open_idle(hosts[command["host"]], command["n"])
            elif op == "turn_idle":
                reply = turn_idle(hosts[command["host"]])
            elif op == "floor_idle":
                reply = floor_idle(hosts[command["host"]])
            elif op == "close_idle":
                reply = close_idle(hosts[command["host"]])
            elif op == "cold":
                reply = cold(command["argv"], command["transport"], command["cwd"], command["stderr"])
            else:
                raise BenchError(f"unknown op {op}")
        except (BenchError, grpc.RpcError) as error:
            detail = f"{error.code()}: {error.details()}" if isinstance(error, grpc.RpcError) else str(error)
            reply = {"error": detail}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
