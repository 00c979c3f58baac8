"""redis-py against strata: pub/sub (RESP2 and RESP3), pipelines and transactions.

Run by the Rust integration test `pubsub::redis_py_works_against_strata` with the
server's port as the only argument; exits non-zero (with a message) on any failure.
"""

import sys
import time

import redis


def wait_message(pubsub, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        msg = pubsub.get_message(timeout=0.1)
        if msg is not None:
            return msg
    raise AssertionError("no message within %.1fs" % timeout)


def check_pubsub(port, protocol):
    sub_client = redis.Redis(port=port, protocol=protocol)
    pub = redis.Redis(port=port)
    ps = sub_client.pubsub()
    ps.subscribe("news")
    assert wait_message(ps) == {
        "type": "subscribe",
        "pattern": None,
        "channel": b"news",
        "data": 1,
    }
    ps.psubscribe("sp*")
    assert wait_message(ps)["type"] == "psubscribe"
    assert pub.publish("news", "hello") == 1
    msg = wait_message(ps)
    assert (msg["type"], msg["channel"], msg["data"]) == ("message", b"news", b"hello"), msg
    assert pub.publish("sport", b"\x00\xffbinary") == 1
    msg = wait_message(ps)
    assert (msg["type"], msg["pattern"], msg["channel"], msg["data"]) == (
        "pmessage",
        b"sp*",
        b"sport",
        b"\x00\xffbinary",
    ), msg
    assert pub.pubsub_numsub("news") == [(b"news", 1)]
    assert pub.pubsub_numpat() == 1
    assert pub.pubsub_channels() == [b"news"]
    # Many messages arrive in order.
    for i in range(200):
        pub.publish("news", str(i))
    for i in range(200):
        assert wait_message(ps)["data"] == str(i).encode()
    ps.unsubscribe()
    ps.punsubscribe()
    ps.close()
    deadline = time.time() + 5
    while pub.pubsub_numsub("news") != [(b"news", 0)] and time.time() < deadline:
        time.sleep(0.02)
    assert pub.pubsub_numsub("news") == [(b"news", 0)]


def check_pipeline_and_transaction(port):
    r = redis.Redis(port=port)
    r.delete("counter", "list")
    pipe = r.pipeline(transaction=False)
    for i in range(100):
        pipe.incr("counter")
        pipe.rpush("list", i)
    replies = pipe.execute()
    assert replies[-2:] == [100, 100], replies[-2:]
    with r.pipeline() as tx:
        tx.multi()
        tx.set("a", "1")
        tx.incr("a")
        tx.publish("news", "in a transaction")
        assert tx.execute() == [True, 2, 0]

    # WATCH: a change by another client aborts the transaction.
    other = redis.Redis(port=port)
    with r.pipeline() as tx:
        tx.watch("a")
        other.set("a", "changed")
        tx.multi()
        tx.set("a", "mine")
        try:
            tx.execute()
            raise AssertionError("the transaction should have been aborted")
        except redis.WatchError:
            pass
    assert r.get("a") == b"changed"


def check_keyspace_events(port):
    r = redis.Redis(port=port)
    r.config_set("notify-keyspace-events", "KEA")
    ps = r.pubsub()
    ps.psubscribe("__keyevent@0__:*")
    wait_message(ps)
    r.set("k", "v", px=50)
    seen = []
    deadline = time.time() + 5
    while "expired" not in seen and time.time() < deadline:
        msg = ps.get_message(timeout=0.1)
        if msg and msg["type"] == "pmessage":
            seen.append(msg["channel"].decode().split(":", 1)[1])
    assert seen[:2] == ["set", "expire"], seen
    assert "expired" in seen, seen
    r.config_set("notify-keyspace-events", "")
    ps.close()


def main():
    port = int(sys.argv[1])
    check_pubsub(port, 2)
    check_pubsub(port, 3)
    check_pipeline_and_transaction(port)
    check_keyspace_events(port)
    print("redis-py: all checks passed")


if __name__ == "__main__":
    main()
