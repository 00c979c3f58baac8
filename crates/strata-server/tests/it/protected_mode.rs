//! Protected mode seen from a client that is not on loopback.
//!
//! Such a client needs an address of this machine outside 127.0.0.0/8. The test makes
//! one in a network namespace of its own (`unshare -n`): 192.0.2.1, from the range
//! reserved for documentation, on the namespace's private loopback device, so no
//! packet leaves the namespace. It runs strata and `redis-cli` inside and reads what
//! the remote and the loopback client were told. Where namespaces cannot be made (no
//! privilege), it says so and skips.

use std::process::Command;

const SCRIPT: &str = r#"
set -e
ip link set lo up
ip addr add 192.0.2.1/32 dev lo
run() {
    "$BIN" --port 7000 --bind "192.0.2.1 127.0.0.1" --appendonly no --loglevel warning "$@" >/dev/null 2>&1 &
    pid=$!
    for i in $(seq 200); do
        redis-cli -h 127.0.0.1 -p 7000 ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    echo "remote: $(timeout 5 redis-cli -h 192.0.2.1 -p 7000 ping 2>&1 | head -c 41)"
    echo "local: $(timeout 5 redis-cli -h 127.0.0.1 -p 7000 ping 2>&1)"
    kill $pid
    wait $pid || true
}
echo "== default"
run
echo "== password"
run --requirepass pw
echo "== off"
run --protected-mode no
"#;

#[test]
fn protected_mode_refuses_remote_clients_without_a_password() {
    let usable = Command::new("unshare")
        .args(["-n", "true"])
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
        && Command::new("redis-cli")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !usable {
        eprintln!("note: no network namespaces, ip or redis-cli here; skipping");
        return;
    }
    let out = Command::new("timeout")
        .args(["60", "unshare", "-n", "sh", "-c", SCRIPT])
        .env("BIN", env!("CARGO_BIN_EXE_strata-server"))
        .output()
        .expect("run the namespace script");
    let text = String::from_utf8_lossy(&out.stdout);
    let expected = "== default\n\
                    remote: DENIED Redis is running in protected mode\n\
                    local: PONG\n\
                    == password\n\
                    remote: NOAUTH Authentication required.\n\
                    local: NOAUTH Authentication required.\n\
                    == off\n\
                    remote: PONG\n\
                    local: PONG\n";
    assert_eq!(
        text,
        expected,
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
