//! Per-VC buffers and EPD thresholds in a switch port shared by two flows.

mod common;

use common::{loss, one_run};
use flowlab_sim::load;

/// The hog and the small flow of [`common::shared_port`]; `port` and `hog` add keys to the
/// port's link and the hog's flow.
fn shared_port(port: &str, hog: &str) -> String {
    common::shared_port(port, hog, "")
}

#[test]
fn a_vc_limit_keeps_room_for_the_others() {
    let shared = one_run(&shared_port("", ""));
    assert!(loss(&shared, "small") > 0.05, "{}", loss(&shared, "small"));
    for (port, hog) in [
        ("vc_buffer_cells = 1000", ""),
        ("", "vc_buffer_cells = 1000"),
    ] {
        let limited = one_run(&shared_port(port, hog));
        assert_eq!(loss(&limited, "small"), 0.0, "{port}{hog}");
        assert!(loss(&limited, "hog") > 0.3);
    }
}

#[test]
fn a_flow_overrides_its_links_vc_limits() {
    let r = one_run(&shared_port(
        "vc_buffer_cells = 1000",
        "vc_buffer_cells = 2000",
    ));
    assert!(loss(&r, "small") > 0.05, "the hog may fill the port again");
}

#[test]
fn vc_epd_discards_whole_frames() {
    let plain = one_run(&shared_port("vc_buffer_cells = 1000", ""));
    let epd = one_run(&shared_port("vc_buffer_cells = 1000\nvc_epd = 800", ""));
    let port = epd.ports.iter().find(|p| p.name == "s->b").unwrap();
    assert!(port.frames_epd > 0);
    // Without EPD nearly every hog frame loses a cell; with it, whole frames go and the
    // rest arrive intact (60 Mb/s offered into about 31.5 Mb/s left: about half).
    assert!(loss(&plain, "hog") > 0.9, "{}", loss(&plain, "hog"));
    assert!(
        (0.4..0.55).contains(&loss(&epd, "hog")),
        "{}",
        loss(&epd, "hog")
    );
    assert_eq!(loss(&epd, "small"), 0.0);
}

#[test]
fn bad_vc_limits_are_one_line_errors() {
    for (port, hog, want) in [
        (
            "vc_buffer_cells = 100\nvc_epd = 100",
            "",
            "must be below vc_buffer_cells",
        ),
        ("", "vc_buffer_cells = 0", "vc_buffer_cells"),
    ] {
        let e = load(&shared_port(port, hog)).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{e}");
    }
}
