//! Runs a scenario file and prints the human summary: `cargo run --release -p flowlab-sim
//! --example run_scenario -- FILE [DURATION]` (the CLI's `flowlab sim` does the same).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: run_scenario FILE [DURATION] [--json]");
        std::process::exit(2);
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            std::process::exit(1);
        }
    };
    let mut scenario = match flowlab_sim::load(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{}", e.with_file(path));
            std::process::exit(1);
        }
    };
    if let Some(d) = args.get(2).filter(|a| !a.starts_with("--")) {
        match flowlab_units::parse_duration(d) {
            Ok(d) => scenario.set_duration_ns(d.as_nanos() as u64),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
    }
    let report = flowlab_sim::run(&scenario, None);
    if args.iter().any(|a| a == "--json") {
        println!("{}", flowlab_sim::to_json(&report));
    } else {
        print!("{}", flowlab_sim::render_human(&report));
    }
}
