//! A service category's own queue in a switch port (`queues` on an ATM link): its size keeps
//! the other categories' room, and every VC of the category shares it.

mod common;

use common::{loss, one_run};
use flowlab_sim::load;

/// A UBR hog of [`common::shared_port`] and its small flow in `service`; `port` adds keys
/// to the port's link.
fn shared_port(port: &str, service: &str) -> String {
    common::shared_port(
        port,
        "service = \"ubr\"",
        &format!("service = \"{service}\""),
    )
}

const UBR_QUEUE: &str = r#"queues = [{ service = "ubr", buffer_cells = 1000 }]"#;

#[test]
fn a_category_queue_keeps_room_for_the_other_categories() {
    // Sharing the buffer, the hog's cells fill it and the higher category's cells find it
    // full; with the UBR queue bounded they always find room.
    let shared = one_run(&shared_port("", "nrt-vbr"));
    assert!(loss(&shared, "small") > 0.05, "{}", loss(&shared, "small"));
    let bounded = one_run(&shared_port(UBR_QUEUE, "nrt-vbr"));
    assert_eq!(loss(&bounded, "small"), 0.0);
    let port = bounded.ports.iter().find(|p| p.name == "s->b").unwrap();
    assert!(
        port.max_occupancy_cells <= 1000 + 32,
        "{}",
        port.max_occupancy_cells
    );
}

#[test]
fn the_vcs_of_a_category_share_its_queue() {
    // Both UBR: the hog keeps the shared UBR queue full, and the small flow's frames lose
    // cells in it (a per-VC limit would instead give each its own room).
    let same = one_run(&shared_port(UBR_QUEUE, "ubr"));
    assert!(loss(&same, "small") > 0.5, "{}", loss(&same, "small"));
    let per_vc = one_run(&shared_port("vc_buffer_cells = 1000", "ubr"));
    assert_eq!(loss(&per_vc, "small"), 0.0);
}

#[test]
fn bad_category_queues_are_one_line_errors() {
    for (port, want) in [
        (
            r#"queues = [{ service = "ubr", buffer_cells = 100, clp_threshold = 100 }]"#,
            "must be below the queue's 100 cells",
        ),
        (
            r#"queues = [{ service = "abr", epd = 10 }]"#,
            "unknown \"abr\"",
        ),
        (
            r#"queues = [{ service = "ubr", buffer_cells = 3000 }]"#,
            "exceed",
        ),
        (r#"queues = { service = "ubr" }"#, "array of tables"),
    ] {
        let e = load(&shared_port(port, "ubr")).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{e}");
    }
}
