//! The report's JSON lines and the run's size, as tools and `--smoke` read them.

use super::*;

#[test]
fn each_figure_is_one_json_line_in_the_stated_key_order_with_its_ratio() {
    let mut report = Report::new("store", Size::Smoke);
    report.figure("put, 1 writer", 250.0, "ops/s").ceiling(1000.0);
    report.figure("range read", 1.5, "ms");
    report.figure("CREATE-1 Secret", 10.0, "req/s").ceiling(40.0).ratio(0.3);
    let lines: Vec<String> = report.figures.iter().map(|figure| figure.json(report.bench)).collect();
    assert_eq!(
        lines,
        [
            r#"{"bench":"store","name":"put, 1 writer","value":250.0,"unit":"ops/s","ceiling":1000.0,"ratio":0.25}"#,
            r#"{"bench":"store","name":"range read","value":1.5,"unit":"ms","ceiling":null,"ratio":null}"#,
            r#"{"bench":"store","name":"CREATE-1 Secret","value":10.0,"unit":"req/s","ceiling":40.0,"ratio":0.3}"#,
        ]
    );
}

#[test]
fn a_value_that_is_not_a_number_is_null_so_no_tool_reads_it_as_a_figure() {
    let mut report = Report::new("loop", Size::Full);
    report.figure("p99", f64::NAN, "ms").ceiling(0.0);
    assert_eq!(
        report.figures[0].json("loop"),
        r#"{"bench":"loop","name":"p99","value":null,"unit":"ms","ceiling":0.0,"ratio":null}"#
    );
}

#[test]
fn smoke_is_asked_for_anywhere_among_the_arguments_and_taken_out_of_them() {
    let args = |list: &[&str]| list.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
    assert_eq!(Size::of(&args(&["--store", "sled", "--smoke"])), (Size::Smoke, args(&["--store", "sled"])));
    assert_eq!(Size::of(&args(&["--rounds", "3"])), (Size::Full, args(&["--rounds", "3"])));
}

#[test]
fn the_table_shows_whole_numbers_whole_small_ones_with_more_digits_and_no_nan() {
    let shown: Vec<String> = [20.0, 1234.56, 12.345, 0.01234, f64::NAN, f64::INFINITY].map(number).into();
    assert_eq!(shown, ["20", "1235", "12.35", "0.012", "-", "-"]);
}
