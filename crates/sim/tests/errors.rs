//! Every kind of bad scenario is refused before running, with the line at fault.

use flowlab_sim::load;

const BASE: &str = r#"[sim]
duration = "1s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "s"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "s"
phy = "OC-3c"
[[link]]
from = "s"
to = "b"
phy = "OC-3c"
"#;

/// Loads BASE + `extra` and returns (line, message).
fn error(extra: &str) -> (usize, String) {
    let text = format!("{BASE}{extra}");
    let e = load(&text).expect_err("should fail");
    (e.line.expect("a line"), e.message)
}

const BASE_LINES: usize = 19;

#[test]
fn base_is_valid() {
    assert!(load(BASE).is_ok());
    assert_eq!(BASE.lines().count(), BASE_LINES);
}

#[test]
fn unknown_node() {
    let (line, msg) =
        error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"nowhere\"\nrate = \"1M\"\n");
    assert_eq!(line, BASE_LINES + 4);
    assert!(msg.contains("unknown node \"nowhere\""), "{msg}");
}

#[test]
fn zero_rate() {
    let (line, msg) = error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"0\"\n");
    assert_eq!(line, BASE_LINES + 5);
    assert!(msg.contains("greater than zero"), "{msg}");
}

#[test]
fn mtu_below_headers() {
    let (line, msg) = error("[[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nmtu = 20\n");
    assert_eq!(line, BASE_LINES + 5);
    assert!(msg.contains("below the 40 bytes"), "{msg}");
}

#[test]
fn scr_above_pcr() {
    let (line, msg) = error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nservice = \"nrt-vbr\"\npcr = \"1M\"\nscr = \"2M\"\n");
    assert_eq!(line, BASE_LINES + 8);
    assert!(msg.contains("above pcr"), "{msg}");
}

#[test]
fn routing_loop_and_no_path() {
    let (line, msg) = error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\npath = [\"a\", \"s\", \"a\", \"b\"]\n");
    assert_eq!(line, BASE_LINES + 6);
    assert!(msg.contains("routing loop"), "{msg}");
    let (line, msg) = error("[[node]]\nname = \"c\"\nkind = \"host\"\n[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"c\"\nrate = \"1M\"\n");
    assert_eq!(line, BASE_LINES + 4);
    assert!(msg.contains("no path"), "{msg}");
}

#[test]
fn unknown_key() {
    let (line, msg) =
        error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nsped = 3\n");
    assert_eq!(line, BASE_LINES + 6);
    assert!(msg.contains("sped"), "{msg}");
}

#[test]
fn sweep_errors_point_at_the_value() {
    let text = format!("{BASE}[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\n[sweep]\nparam = \"flow.f.rate\"\nvalues = [\"1M\", \"0\"]\n");
    let e = load(&text).unwrap_err();
    assert_eq!(e.line, Some(BASE_LINES + 5));
    assert!(e.message.contains("sweep value 0"), "{}", e.message);
    let shown = e.with_file("x.toml").to_string();
    assert!(
        shown.starts_with(&format!("x.toml:{}: ", BASE_LINES + 5)),
        "{shown}"
    );
}

#[test]
fn display_without_file() {
    let e = load("[sim]\nduration = \"fast\"\n").unwrap_err();
    assert!(e.to_string().starts_with("line 2: duration"), "{e}");
}
