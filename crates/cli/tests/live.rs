//! `flowlab test --live` where stdout is not a terminal: the plain interval lines, every
//! second by default, and the result below them.

mod common;

use common::*;

#[test]
fn live_without_a_terminal_prints_the_plain_lines() {
    let agent = loopback_agent(&[]);
    let out = flowlab(&[
        "test",
        &agent.addr,
        "--rate",
        "1M",
        "-d",
        "2s",
        "--live",
        "--no-store",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains('\u{1b}'),
        "no escape sequences in a pipe: {text:?}"
    );
    let intervals = text
        .lines()
        .filter(|l| l.contains("-1.00   s") || l.contains("-2.00   s"));
    assert_eq!(intervals.count(), 2, "one line a second: {text}");
    assert!(text.contains("\nResult ("), "{text}");
}

#[test]
fn live_is_for_text_output() {
    let o = flowlab(&["test", "127.0.0.1", "--live", "--json"]);
    assert_one_line_error(&o, "'--live' cannot be used with '--json'");
    assert_eq!(o.status.code(), Some(2));
}

/// Each interval carries the client's schedule error since the one before, as the live view
/// shows it; a reverse test's sender is the agent, whose intervals have none.
#[test]
fn intervals_carry_the_clients_schedule_error() {
    let agent = loopback_agent(&[]);
    let run = |extra: &[&str]| {
        let mut args = vec!["test", &agent.addr, "--rate", "1M", "-d", "2s", "-i", "1s"];
        args.extend_from_slice(extra);
        args.extend(["--json", "--no-store"]);
        let out = flowlab(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let v = run(&[]);
    let intervals = v["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 2, "{v}");
    let counts: Vec<u64> = intervals
        .iter()
        .map(|i| i["schedule_error"]["count"].as_u64().unwrap_or(0))
        .collect();
    let sent = v["client"]["sender"]["packets_sent"].as_u64().unwrap();
    assert!(counts.iter().take(2).all(|&c| c > 0), "{counts:?}");
    let total: u64 = counts.iter().sum();
    assert!(total <= sent && total >= sent / 2, "{counts:?} of {sent}");
    let reverse = run(&["-R"]);
    let intervals = reverse["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty(), "{reverse}");
    assert!(
        intervals.iter().all(|i| i["schedule_error"].is_null()),
        "{reverse}"
    );
}
