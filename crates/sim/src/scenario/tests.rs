use flowlab_link::config;

use super::*;

/// The one link of a two-host network whose link table has `keys` (TOML lines).
fn link(keys: &str) -> Result<LinkSpec, ScenarioError> {
    let text = format!(
        "[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\
         [[link]]\nfrom = \"a\"\nto = \"b\"\n{keys}\n"
    );
    let root = flowlab_spanned::parse(&text)?;
    let doc = Reader::of(&root, "")?;
    let nodes = read_nodes(&tables(&doc, "node")?)?;
    Ok(read_links(&tables(&doc, "link")?, &nodes)?.remove(0))
}

/// The impairment stage a lab link's `emulate = { body }` gets.
fn emulated(body: &str) -> Option<ImpairConfig> {
    let root = flowlab_spanned::parse(&format!("emulate = {{ {body} }}\n")).expect("toml");
    let doc = Reader::of(&root, "").expect("table");
    let e = Reader::of(doc.required("emulate").expect("emulate"), "emulate").expect("table");
    config::read(&e).expect("emulate keys").impair
}

#[test]
fn impairment_keys_parse_as_a_lab_link_parses_them() {
    let cases: [&[&str]; 3] = [
        &[
            r#"rate = "20M""#,
            r#"delay = "15ms""#,
            r#"jitter = "3ms""#,
            r#"distribution = "normal""#,
            r#"loss = "2%""#,
            "loss_burst = 4",
        ],
        &[
            r#"rate = "10M""#,
            "gemodel = { p = 0.01, r = 0.3, loss_bad = 0.9 }",
            "duplicate = 0.001",
        ],
        &[
            r#"rate = "1G""#,
            r#"delay = "1ms""#,
            r#"reorder = "5%""#,
            "limit = 200",
            r#"distribution = "pareto""#,
            r#"jitter = "100us""#,
        ],
    ];
    for keys in cases {
        let lab = emulated(&keys.join(", "));
        let sim = link(&keys.join("\n")).expect("a simulated link");
        assert!(lab.is_some());
        assert_eq!(sim.impair, lab, "{keys:?}");
        assert_eq!(sim.delay_ns, 0, "the stage holds the delay");
    }
}

#[test]
fn a_delay_alone_stays_the_links_propagation_delay() {
    let body = r#"rate = "10M", delay = "95ms""#;
    assert_eq!(emulated(body).map(|i| i.delay_ns), Some(95_000_000));
    let sim = link(&body.replace(", ", "\n")).unwrap();
    assert_eq!((sim.delay_ns, sim.impair), (95_000_000, None));
    let atm = link("phy = \"OC-3c\"\ndelay = \"95ms\"").unwrap();
    assert_eq!((atm.delay_ns, atm.impair), (95_000_000, None));
}

#[test]
fn bad_impairment_keys_are_one_line_errors_naming_their_line() {
    for (keys, want) in [
        (
            "rate = \"10M\"\njitter = \"-1ms\"",
            "line 11: link a-b jitter",
        ),
        ("rate = \"10M\"\nloss_burst = 3", "needs loss"),
        ("rate = \"10M\"\ndistribution = \"cauchy\"", "distribution"),
        ("phy = \"E1\"\njitter = \"1ms\"", "line 11: link a-b jitter"),
    ] {
        let e = link(keys).expect_err(keys).to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{keys}: {e}");
    }
}
