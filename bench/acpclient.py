"""The benchmark scripts' ACP client: an agent process driven as an editor
drives it, one JSON-RPC message a line on its stdin and stdout.

A script in a directory below bench/ imports it with

  sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
  from acpclient import Agent
"""
import json, subprocess


class Agent:
    def __init__(self, cmd, env=None):
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        self.pid = self.p.pid
        self.n = 0

    def send(self, *msgs):
        """Writes msgs in one write, as a busy editor does."""
        self.p.stdin.write("".join(json.dumps(m) + "\n" for m in msgs).encode())
        self.p.stdin.flush()

    def until(self, pred):
        """The agent's next message for which pred holds; None at the end of
        its output (or a line cut by its death)."""
        while True:
            line = self.p.stdout.readline()
            if not line:
                return None
            try:
                m = json.loads(line)
            except ValueError:
                return None
            if pred(m):
                return m

    def call(self, method, params):
        """Sends a request with the next id and returns its response."""
        self.n += 1
        n = self.n
        self.send({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
        return self.until(lambda m: m.get("id") == n and "method" not in m)

    def close(self, timeout=10):
        """Closes its stdin and returns its exit status."""
        self.p.stdin.close()
        return self.p.wait(timeout=timeout)
