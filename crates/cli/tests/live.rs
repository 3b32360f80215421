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
