use std::time::Duration;

use flowlab_control::TestOptions;
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_stats::LatencySummary;
use ratatui::backend::TestBackend;

use super::*;

fn interval(index: u64, throughput_bps: f64, lost: u64, p99_us: f64) -> IntervalReport {
    let us = |x: f64| x * 1000.0;
    let late = |max_us: f64| LatencySummary {
        count: 500 - lost,
        min_ns: us(-2.0),
        mean_ns: us(1.0),
        max_ns: us(max_us),
        variance_ns2: 0.0,
        stddev_ns: 0.0,
        p50_ns: us(1.0),
        p90_ns: us(2.0),
        p99_ns: us(max_us / 2.0),
        p999_ns: us(max_us),
        peak_to_peak_ns: 0.0,
    };
    IntervalReport {
        index,
        start_ns: index * 1_000_000_000,
        end_ns: (index + 1) * 1_000_000_000,
        packets: 500 - lost,
        bytes: (500 - lost) * 500,
        lost,
        reordered: 0,
        throughput_bps,
        packets_per_sec: (500 - lost) as f64,
        delay: Some(LatencySummary {
            count: 500,
            min_ns: us(40.0),
            mean_ns: us(60.0),
            max_ns: us(p99_us + 10.0),
            variance_ns2: 0.0,
            stddev_ns: 0.0,
            p50_ns: us(55.0),
            p90_ns: us(80.0),
            p99_ns: us(p99_us),
            p999_ns: us(p99_us),
            peak_to_peak_ns: 0.0,
        }),
        jitter_ns: us(5.0),
        tcp_info: None,
        // The interval with losses is the one whose departures came late.
        schedule_error: Some(late(if lost > 0 { 800.0 } else { 8.0 })),
    }
}

fn view() -> LiveView<TestBackend> {
    let terminal = ratatui::Terminal::new(TestBackend::new(80, HEIGHT)).unwrap();
    let mut view = LiveView::new(terminal);
    let options = TestOptions {
        target: "10.0.0.2".into(),
        spec: TestSpec {
            rate_bps: Some(2_000_000),
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        },
        key: None,
        drain: Duration::from_millis(500),
        interface: None,
        agent_interface: None,
        bind: None,
        cport: None,
    };
    view.on(Event::TestStarted(&options));
    view
}

/// The drawn screen, one string per row.
fn rows(view: &LiveView<TestBackend>) -> Vec<String> {
    let buffer = view.backend().buffer();
    let width = usize::from(buffer.area.width);
    let symbols: Vec<&str> = buffer.content.iter().map(|c| c.symbol()).collect();
    symbols.chunks(width).map(|row| row.concat()).collect()
}

#[test]
fn each_interval_redraws_the_figures_and_the_plots() {
    let mut view = view();
    let before = rows(&view);
    // A headline longer than the frame goes on under its title, a figure kept with its unit.
    assert!(before[0].contains("to 10.0.0.2"), "{before:#?}");
    assert!(
        before[1].contains("│1200 B packets for 10.0 s "),
        "{before:#?}"
    );
    assert!(
        before[2].contains("waiting for the first interval"),
        "{before:#?}"
    );
    for (i, (rate, lost, p99)) in [(2e6, 0, 90.0), (1e6, 50, 400.0), (2e6, 0, 120.0)]
        .into_iter()
        .enumerate()
    {
        let report = interval(i as u64, rate, lost, p99);
        view.on(Event::Interval {
            report: &report,
            transactions: false,
        });
    }
    let screen = rows(&view);
    let text = screen.join("\n");
    assert!(
        screen[2].contains("3.0 s  throughput 2.00 Mbit/s"),
        "{text}"
    );
    assert!(
        screen[2].contains("lost 0 here, 50 (3.33 %) in all"),
        "{text}"
    );
    assert!(
        screen[3].contains("delay p50 55.0 µs  p90 80.0 µs  p99 120 µs"),
        "{text}"
    );
    assert!(text.contains(" max 2.00 Mbit/s "), "{text}");
    assert!(text.contains(" max 50 "), "{text}");
    assert!(text.contains(" max 400 µs "), "{text}");
    assert!(
        screen[4].contains("schedule error p50 1.00 µs  p99 4.00 µs  max 8.00 µs  (500 packets)"),
        "{text}"
    );
    assert!(
        text.contains(" sent late ") && text.contains(" max 800 µs "),
        "{text}"
    );
    // The plots' first row holds only the peaks' full bars: the two 2 Mbit/s intervals,
    // the one with losses, the 400 µs delay and the 800 µs lateness; the dips stay below.
    let plot_top = &screen[7];
    assert_eq!(plot_top.matches('█').count(), 5, "{text}");
}

#[test]
fn an_interval_without_schedule_error_says_why() {
    let mut view = view();
    let report = IntervalReport {
        schedule_error: None,
        ..interval(0, 1e6, 0, 100.0)
    };
    view.on(Event::Interval {
        report: &report,
        transactions: false,
    });
    let screen = rows(&view);
    assert!(
        screen[4].contains("schedule error: not measured here (max rate, TCP, or the agent sends)"),
        "{screen:#?}"
    );
}

#[test]
fn the_history_is_bounded() {
    let mut state = LiveState::default();
    for i in 0..(HISTORY as u64 + 10) {
        state.push(&interval(i, 1e6, 0, 100.0));
    }
    assert_eq!(state.history.len(), HISTORY);
    assert_eq!(state.series(30, |p| p.lost).len(), 30);
    assert_eq!(state.packets, 500 * (HISTORY as u64 + 10));
}

#[test]
fn the_view_is_drawn_on_a_terminal_only() {
    assert!(draws_live(Output::Human, true, true));
    assert!(
        !draws_live(Output::Human, true, false),
        "piped: plain lines"
    );
    assert!(!draws_live(Output::Human, false, true));
    assert!(!draws_live(Output::JsonStream, true, true));
}
