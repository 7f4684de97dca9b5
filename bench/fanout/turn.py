"""Timing one prompt that asks permission, for agent.py and sdk_agent.py:
the time to its first streamed update, and the permission round trip (from
the answer to the request to the prompt's answer)."""
import time


def ms(start):
    return (time.perf_counter() - start) * 1000


def prompt_times(a, sid, text):
    a.n += 1
    n = a.n
    start = time.perf_counter()
    a.send({"jsonrpc": "2.0", "id": n, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}})
    a.until(lambda m: m.get("method") == "session/update")
    first = ms(start)
    req = a.until(lambda m: m.get("method") == "session/request_permission")
    start = time.perf_counter()
    a.send({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": {"outcome": "selected", "optionId": "yes"}}})
    a.until(lambda m: m.get("id") == n and "method" not in m)
    return first, ms(start)
