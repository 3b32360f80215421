//! Rendered output: a snapshot of a plot against a committed file, byte-identical re-plots, and
//! a self-contained report. Regenerate snapshots with `FLOWLAB_UPDATE_SNAPSHOTS=1 cargo test`.

use flowlab_report::{html, plot, PlotKind, PlotRequest, Scales};
use flowlab_results::PacketRecord;
use flowlab_store::{Environment, RunId, Store};
use serde_json::json;

/// A small sweep: sizes × protocols, 3 repetitions, with intervals and one packet log.
fn fixture(store: &mut Store) -> RunId {
    let env = Environment {
        hostname: "lab1".into(),
        kernel: "6.1.0".into(),
        cpu_model: "Test CPU".into(),
        flowlab_version: "0.1.0".into(),
        clock_source: "tsc".into(),
    };
    let run = store
        .begin_run(
            "sweep",
            &json!({"vary": ["size", "proto"], "rate": "2M"}),
            &env,
        )
        .unwrap();
    for proto in ["udp", "tcp"] {
        for size in [100u32, 500, 1000, 2000] {
            for rep in 0..3u32 {
                let base = if proto == "udp" { 50.0 } else { 80.0 };
                let rtt = base + f64::from(size) * 0.02 + f64::from(rep) * 1.5;
                let loss = f64::from(size) / 1000.0 + f64::from(rep) * 0.1;
                let intervals: Vec<_> = (0..4)
                    .map(|i| json!({"index": i, "start_ns": i * 250_000_000u64, "end_ns": (i + 1) * 250_000_000u64,
                        "throughput_bps": 2.0e6 - f64::from(i as u32) * 1e4, "packets_per_sec": 250.0, "lost": 0, "reordered": 0,
                        "delay": null, "jitter_ns": 1000.0, "tcp_info": null}))
                    .collect();
                let packets: Vec<PacketRecord> = (0..200u64)
                    .map(|seq| PacketRecord {
                        flow: 0,
                        seq,
                        size,
                        sent_ns: Some(1_000_000_000 + seq * 4_000_000),
                        received_ns: (seq % 37 != 5).then_some(
                            1_000_000_000 + seq * 4_000_000 + 50_000 + (seq * 7919 % 97) * 1000,
                        ),
                        echoed_ns: Some(1_000_000_000 + seq * 4_000_000 + 25_000),
                    })
                    .collect();
                let with_packets = proto == "udp" && size == 100 && rep == 0;
                store
                    .add_point(
                        run,
                        &json!({"size": size, "proto": proto}),
                        rep,
                        &json!({"intervals": intervals}),
                        &[
                            ("rtt_mean_us".into(), rtt),
                            ("loss_pct".into(), loss),
                            ("rtt_p99_us".into(), rtt * 1.3),
                        ],
                        with_packets.then_some(packets.as_slice()),
                    )
                    .unwrap();
            }
        }
    }
    run
}

fn check_snapshot(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("FLOWLAB_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing snapshot {}: run with FLOWLAB_UPDATE_SNAPSHOTS=1",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{name} differs from its snapshot; if intended, regenerate with FLOWLAB_UPDATE_SNAPSHOTS=1"
    );
}

fn lines_request() -> PlotRequest {
    PlotRequest {
        kind: PlotKind::Lines,
        x: Some("size".into()),
        ys: vec!["rtt".into(), "loss".into()],
        by: vec!["proto".into()],
        point: None,
        scales: Scales::default(),
    }
}

#[test]
fn lines_plot_matches_snapshot() {
    let mut s = Store::open_in_memory().unwrap();
    let id = fixture(&mut s);
    let run = s.load_run(id).unwrap();
    let svg = flowlab_report::plot(&s, &run, &lines_request())
        .unwrap()
        .svg()
        .unwrap();
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("<text"));
    check_snapshot("lines_rtt_loss_by_proto.svg", &svg);
}

#[test]
fn loss_index_plot_matches_snapshot() {
    let mut s = Store::open_in_memory().unwrap();
    let id = fixture(&mut s);
    let run = s.load_run(id).unwrap();
    let req = PlotRequest {
        kind: PlotKind::LossIndex,
        x: None,
        ys: vec![],
        by: Vec::new(),
        point: None,
        scales: Scales::default(),
    };
    check_snapshot(
        "loss_index.svg",
        &flowlab_report::plot(&s, &run, &req).unwrap().svg().unwrap(),
    );
}

/// Re-plotting the same stored run, from a reopened database file, gives identical bytes.
#[test]
fn replotting_a_stored_run_is_byte_identical() {
    let dir = std::env::temp_dir().join(format!("flowlab-report-{}", std::process::id()));
    let path = dir.join("h.sqlite3");
    let _ = std::fs::remove_dir_all(&dir);
    let id = fixture(&mut Store::open(&path).unwrap());
    let render = || {
        let s = Store::open(&path).unwrap();
        let run = s.load_run(id).unwrap();
        let mut out = Vec::new();
        for kind in [
            PlotKind::Lines,
            PlotKind::TimeSeries,
            PlotKind::Histogram,
            PlotKind::Cdf,
            PlotKind::LossIndex,
            PlotKind::DelayTime,
        ] {
            let req = PlotRequest {
                kind,
                ..lines_request()
            };
            let req = if kind == PlotKind::TimeSeries {
                PlotRequest {
                    ys: vec!["goodput_bps".into()],
                    ..req
                }
            } else {
                req
            };
            out.push(flowlab_report::plot(&s, &run, &req).unwrap().svg().unwrap());
        }
        out.push(html::report(&s, &run).unwrap());
        out
    };
    assert_eq!(render(), render());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_is_self_contained() {
    let mut s = Store::open_in_memory().unwrap();
    let id = fixture(&mut s);
    let run = s.load_run(id).unwrap();
    let page = html::report(&s, &run).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        page.matches("<svg").count(),
        6,
        "lines, time series and 4 packet plots"
    );
    assert!(page.contains("Test CPU"));
    assert!(page.contains("±"));
    // Labels and units from the metric table, in tables and in the intervals' note.
    assert!(page.contains("<th title=\"size\">packet size</th>"));
    assert!(page.contains("<td>2 kB</td>"));
    assert!(page.contains(
        "95 % intervals: Student t (mean round-trip time); \
         Student t, cut at the range in some rows (packet loss)"
    ));
    for external in [
        "<script", "<link", "src=", "url(", "@import", "http://", "https://",
    ] {
        // The SVG namespace is an identifier, not a resource.
        let hits = page.matches(external).count()
            - if external == "http://" {
                page.matches("http://www.w3.org").count()
            } else {
                0
            };
        assert_eq!(hits, 0, "report refers to {external}");
    }
    assert!(!page.contains("<?xml"));
}

#[test]
fn packet_delays_use_round_trip_when_echoed() {
    let p = |seq, sent, recv, echo| PacketRecord {
        flow: 0,
        seq,
        size: 100,
        sent_ns: Some(sent),
        received_ns: recv,
        echoed_ns: echo,
    };
    let (d, label) =
        plot::packet_delays(&[p(0, 1000, Some(3000), Some(2000)), p(1, 2000, None, None)]);
    assert_eq!(d, vec![(1000, 2.0)]);
    assert!(label.starts_with("round-trip"));
    let (d, label) =
        plot::packet_delays(&[p(0, 1000, Some(9000), None), p(1, 2000, Some(13000), None)]);
    assert_eq!(d, vec![(1000, 0.0), (2000, 3.0)]);
    assert!(label.starts_with("relative"));
}

/// Every kind of plot as PNG and as SVG, plus the offered-load search: each PNG is a real image
/// of the figure's size. `FLOWLAB_PLOT_DIR=DIR` keeps them there, to look at.
#[test]
fn every_plot_kind_renders_as_png_and_svg() {
    let mut s = Store::open_in_memory().unwrap();
    let id = fixture(&mut s);
    let run = s.load_run(id).unwrap();
    let kept = std::env::var_os("FLOWLAB_PLOT_DIR").map(std::path::PathBuf::from);
    let dir = kept.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("flowlab-png-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).unwrap();
    let search = json!({"search": {
        "lossless_bps": 9.0e6, "peak_bps": 9.6e6, "full_load_bps": 9.5e6,
        "points": [{"rate_bps": 3.0e6, "throughput_bps": 3.0e6},
            {"rate_bps": 9.0e6, "throughput_bps": 9.0e6},
            {"rate_bps": 18.0e6, "throughput_bps": 9.5e6}]}});
    let mut figures = vec![("search", plot::search(&search).unwrap())];
    for (kind, name, _) in PlotKind::ALL {
        let ys = match kind {
            PlotKind::TimeSeries => vec!["goodput_bps".into()],
            _ => lines_request().ys,
        };
        let req = PlotRequest {
            kind,
            ys,
            ..lines_request()
        };
        figures.push((name, flowlab_report::plot(&s, &run, &req).unwrap()));
    }
    for (name, figure) in &figures {
        let png = dir.join(format!("{name}.png"));
        figure.write(&png).unwrap();
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}");
        let (w, h) = (
            u32::from_be_bytes(bytes[16..20].try_into().unwrap()),
            u32::from_be_bytes(bytes[20..24].try_into().unwrap()),
        );
        assert!(w >= 800 && h == figure.height(), "{name}: {w}×{h}");
        let svg = dir.join(format!("{name}.svg"));
        figure.write(&svg).unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    }
    if kept.is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A run of one point (nothing swept, no intervals, no packet log) that holds an offered-load
/// search in its parameters, as an experiment with a search stores it.
fn search_run(store: &mut Store) -> RunId {
    let params = json!({"command": "flowlab run search.toml", "search": {
        "lossless_bps": 9.0e6, "peak_bps": 9.6e6, "full_load_bps": 9.5e6,
        "points": [{"rate_bps": 3.0e6, "throughput_bps": 3.0e6},
            {"rate_bps": 9.0e6, "throughput_bps": 9.0e6},
            {"rate_bps": 18.0e6, "throughput_bps": 9.5e6}]}});
    let run = store
        .begin_run("experiment", &params, &Environment::default())
        .unwrap();
    let metrics = [("goodput_bps".to_string(), 9.5e6), ("loss_pct".into(), 0.5)];
    store
        .add_point(run, &json!({}), 0, &json!({}), &metrics, None)
        .unwrap();
    run
}

/// One test (kind `test`, nothing swept) with intervals and a packet log that lost nothing:
/// its loss-index plot has nothing to draw, so the report collapses it.
fn single_test_run(store: &mut Store) -> RunId {
    let params =
        json!({"command": "flowlab test 10.0.0.2 --rate 2M --duration 1s --interval 250ms"});
    let run = store
        .begin_run("test", &params, &Environment::default())
        .unwrap();
    let intervals: Vec<_> = (0..4u64)
        .map(|i| {
            json!({"index": i, "start_ns": i * 250_000_000, "end_ns": (i + 1) * 250_000_000,
            "throughput_bps": 2.0e6, "packets_per_sec": 250.0, "lost": 0, "reordered": 0})
        })
        .collect();
    let packets: Vec<PacketRecord> = (0..50u64)
        .map(|seq| PacketRecord {
            flow: 0,
            seq,
            size: 1000,
            sent_ns: Some(seq * 4_000_000),
            received_ns: Some(seq * 4_000_000 + 60_000 + seq * 100),
            echoed_ns: None,
        })
        .collect();
    let metrics = [("goodput_bps".to_string(), 2.0e6), ("loss_pct".into(), 0.0)];
    let result = json!({"intervals": intervals});
    store
        .add_point(run, &json!({}), 0, &result, &metrics, Some(&packets))
        .unwrap();
    run
}

/// The headless Chromium on PATH, if one is installed (Debian's `chromium`).
fn chromium() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
        .find(|p| p.is_file())
}

/// Appended to a copy of the page: records script errors and each plot's rendered size in the
/// DOM, which `--dump-dom` prints once the page has loaded.
const PROBE: &str = r#"<script>
var errors = [];
window.addEventListener("error", function (e) { errors.push(String(e.message)); });
var sizes = Array.from(document.querySelectorAll("figure svg")).map(function (s) {
  var r = s.getBoundingClientRect(); return Math.round(r.width) + "x" + Math.round(r.height);
});
document.body.setAttribute("data-plot-sizes", sizes.join(" "));
document.body.setAttribute("data-errors", errors.join("|"));
</script>"#;

/// Runs headless Chromium with console logging on stderr; returns its stdout and the console
/// lines it logged (messages and uncaught errors).
fn chromium_run(browser: &std::path::Path, args: &[&str]) -> (String, Vec<String>) {
    let out = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu"])
        .args([
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,4000",
        ])
        .args(args)
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from);
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        console.collect(),
    )
}

/// Every kind of report in a real headless browser: a screenshot is taken, the console has no
/// error, and every plot has a nonzero size. Skipped (and says so) without Chromium.
/// `FLOWLAB_PLOT_DIR=DIR` keeps the pages and screenshots there.
#[test]
fn reports_render_in_a_headless_browser() {
    let Some(browser) = chromium() else {
        println!("skipped: no headless Chromium installed (apt-get install chromium)");
        return;
    };
    let kept = std::env::var_os("FLOWLAB_PLOT_DIR").map(std::path::PathBuf::from);
    let dir = kept.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("flowlab-browser-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).unwrap();
    // The check itself: a page with a script error is caught.
    let broken = dir.join("broken.html");
    std::fs::write(&broken, "<body><script>noSuchFunction();</script></body>").unwrap();
    let (_, console) = chromium_run(&browser, &["--dump-dom", &url(&broken)]);
    assert_eq!(
        console.len(),
        1,
        "the console check sees errors: {console:?}"
    );
    let mut s = Store::open_in_memory().unwrap();
    let runs = [
        ("sweep", fixture(&mut s)),
        ("search", search_run(&mut s)),
        ("test", single_test_run(&mut s)),
    ];
    for (name, id) in runs {
        let page = html::report(&s, &s.load_run(id).unwrap()).unwrap();
        let file = dir.join(format!("{name}.html"));
        std::fs::write(&file, &page).unwrap();
        let shot = dir.join(format!("{name}-report.png"));
        let (_, console) = chromium_run(
            &browser,
            &[&format!("--screenshot={}", shot.display()), &url(&file)],
        );
        assert!(console.is_empty(), "{name}: console says {console:?}");
        assert!(
            std::fs::metadata(&shot).is_ok_and(|m| m.len() > 1000),
            "{name}: no screenshot"
        );
        check_plot_sizes(&browser, &dir, name, &page);
        if name == "test" {
            assert!(page.contains("Lost packets against packet index: no plot"));
        }
    }
    if kept.is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

fn url(file: &std::path::Path) -> String {
    format!("file://{}", file.display())
}

/// Every `<figure>` of the page has a plot of nonzero rendered size, and no script of the
/// probe failed.
fn check_plot_sizes(browser: &std::path::Path, dir: &std::path::Path, name: &str, page: &str) {
    let probed = dir.join(format!("{name}-probe.html"));
    std::fs::write(&probed, page.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let (dom, _) = chromium_run(browser, &["--dump-dom", &url(&probed)]);
    let attr = |key: &str| {
        let start = dom.find(&format!("{key}=\"")).map(|i| i + key.len() + 2)?;
        Some(dom[start..].split('"').next()?.to_string())
    };
    assert_eq!(attr("data-errors").as_deref(), Some(""), "{name}");
    let sizes = attr("data-plot-sizes").unwrap_or_default();
    let sizes: Vec<&str> = sizes.split_whitespace().collect();
    assert_eq!(
        sizes.len(),
        page.matches("<figure>").count(),
        "{name}: {sizes:?}"
    );
    assert!(!sizes.is_empty(), "{name}: a report without plots");
    for size in sizes {
        let (w, h) = size.split_once('x').unwrap();
        assert!(w != "0" && h != "0", "{name}: a plot of size {size}");
    }
}
