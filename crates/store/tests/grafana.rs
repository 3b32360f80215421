//! contrib/grafana/flowlab-fleet.json, the fleet's dashboard over the PostgreSQL archive: valid
//! JSON whose every query (panels and variables), with Grafana's macros expanded as Grafana
//! expands them, runs against a real archive flowlab wrote and finds what was stored.

mod pg_server;

use std::time::{SystemTime, UNIX_EPOCH};

use flowlab_store::{Environment, RunStatus, Store};
use pg_server::PgServer;
use postgres::types::Type;
use serde_json::{json, Value};

const DASHBOARD: &str = include_str!("../../../contrib/grafana/flowlab-fleet.json");

/// The pairs stored, and each one's goodput.
const PAIRS: [(&str, &str, f64); 2] = [("site-a", "site-b", 9.5e6), ("site-b", "site-a", 8.25e6)];

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// Every query of the dashboard: (where, format, SQL).
fn queries(dash: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            let sql = t["rawSql"].as_str().expect("rawSql").to_string();
            let format = t["format"].as_str().expect("format").to_string();
            out.push((p["title"].as_str().unwrap().to_string(), format, sql));
        }
    }
    for v in dash["templating"]["list"].as_array().expect("variables") {
        if v["type"] == "query" {
            let sql = v["query"].as_str().expect("a variable's SQL").to_string();
            out.push((
                format!("${}", v["name"].as_str().unwrap()),
                "variable".into(),
                sql,
            ));
        }
    }
    out
}

/// `sql` with Grafana's macros and this dashboard's variables as Grafana fills them in.
fn expand(sql: &str, from_ns: i64, to_ns: i64) -> String {
    let mut sql = sql.to_string();
    while let Some(start) = sql.find("$__unixEpochNanoFilter(") {
        let open = start + "$__unixEpochNanoFilter(".len();
        let close = open + sql[open..].find(')').expect("a closing parenthesis");
        let column = sql[open..close].to_string();
        let filter = format!("{column} >= {from_ns} AND {column} <= {to_ns}");
        sql.replace_range(start..=close, &filter);
    }
    // Multi-value variables with "All" selected: every value, quoted.
    let hosts = "'site-a','site-b'";
    let sql = sql.replace("$client", hosts).replace("$agent", hosts);
    assert!(
        !sql.contains('$'),
        "a macro or variable left unexpanded:\n{sql}"
    );
    sql
}

fn store_the_mesh(url: &str) {
    let mut s = Store::open_postgres(url).unwrap();
    let run = s
        .begin_run("experiment", &json!({}), &Environment::default())
        .unwrap();
    for (client, agent, goodput) in PAIRS {
        let result = json!({"client": {"host": client}, "agent": {"host": agent}});
        let metrics: Vec<(String, f64)> = [
            ("goodput_bps", goodput),
            ("loss_pct", 0.5),
            ("rtt_p50_us", 100.0),
            ("rtt_p90_us", 150.0),
            ("rtt_p99_us", 400.0),
            ("jitter_us", 3.0),
        ]
        .map(|(n, v)| (n.to_string(), v))
        .into();
        s.add_point(run, &json!({"flow": client}), 0, &result, &metrics, None)
            .unwrap();
    }
    s.finish_run(run, RunStatus::Complete).unwrap();
}

#[test]
fn the_dashboard_is_valid_and_its_queries_run_on_the_archive() {
    let dash: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is valid JSON");
    assert_eq!(dash["uid"], "flowlab-fleet");
    let all = queries(&dash);
    assert_eq!(all.len(), 7, "{all:#?}");
    let Some(server) = PgServer::start("grafana") else {
        return;
    };
    let url = server.database("grafana");
    store_the_mesh(&url);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let now = now_ns();
    let hour = 3_600_000_000_000;
    for (place, format, sql) in &all {
        let rows = client
            .query(expand(sql, now - hour, now + hour).as_str(), &[])
            .unwrap_or_else(|e| panic!("{place}: {e}"));
        assert!(!rows.is_empty(), "{place}: no rows");
        if format == "time_series" {
            let columns: Vec<(&str, &Type)> = rows[0]
                .columns()
                .iter()
                .map(|c| (c.name(), c.type_()))
                .collect();
            assert_eq!(
                columns,
                [
                    ("time", &Type::TIMESTAMPTZ),
                    ("metric", &Type::TEXT),
                    ("value", &Type::FLOAT8)
                ],
                "{place}"
            );
        }
        // A day ago nothing was stored: no rows, or a count of none.
        let old = client
            .query(expand(sql, now - 25 * hour, now - 24 * hour).as_str(), &[])
            .unwrap();
        let counted_none =
            |r: &postgres::Row| r.columns()[0].name() == "tests" && r.get::<_, i64>(0) == 0;
        assert!(
            old.iter().all(counted_none),
            "{place}: the time filter let old rows through"
        );
    }
    check_figures(&mut client, &all, now - hour, now + hour);
}

/// What the panels show is what was stored.
fn check_figures(
    client: &mut postgres::Client,
    all: &[(String, String, String)],
    from: i64,
    to: i64,
) {
    let sql_of = |title: &str| {
        let q = all
            .iter()
            .find(|(p, _, _)| p.starts_with(title))
            .expect(title);
        expand(&q.2, from, to)
    };
    let series = |client: &mut postgres::Client, title: &str| -> Vec<(String, f64)> {
        let rows = client.query(sql_of(title).as_str(), &[]).unwrap();
        let mut v: Vec<(String, f64)> = rows
            .iter()
            .map(|r| (r.get("metric"), r.get("value")))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    assert_eq!(
        series(client, "Throughput"),
        [
            ("site-a → site-b".to_string(), 9.5e6),
            ("site-b → site-a".to_string(), 8.25e6)
        ]
    );
    let rtt = series(client, "Round-trip");
    assert_eq!(rtt.len(), 6);
    assert_eq!(rtt[1], ("site-a → site-b p90".to_string(), 150.0));
    let tests: i64 = client
        .query_one(sql_of("Tests stored").as_str(), &[])
        .unwrap()
        .get(0);
    assert_eq!(tests, 2);
    let latest = client.query(sql_of("Latest").as_str(), &[]).unwrap();
    assert_eq!(latest.len(), 2);
    assert_eq!(latest[0].get::<_, f64>("throughput"), 9.5e6);
    let clients: Vec<String> = client
        .query(sql_of("$client").as_str(), &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(clients, ["site-a", "site-b"]);
}
