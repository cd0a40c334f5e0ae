//! The HTML report of a run (`report.html`, written in the run directory).
//!
//! What it promises: one HTML5 document that stands alone and works offline. Its style is
//! inline, it has no script, and it fetches nothing (no fonts, no images, no links outside the
//! run directory). Every value taken from the run (case ids, arm names, scorer details, error
//! messages, paths) is escaped before it is written. The same run gives the same bytes: the
//! report reads no clock and draws no random numbers.
//!
//! It holds the run's header (what ran, when, for how long), a table of the arms, charts of the
//! pass rate, mean score, tokens and cache hit ratio per arm (hand-drawn SVG), and a matrix of
//! cases by arms whose cells link to each session's trace.

use std::fmt::Write as _;

use crate::results::{ArmSummary, CaseResult, Run, Tokens};
use murmur_trace::time::utc;

/// The self-contained HTML report of `run`.
pub fn html(run: &Run, summaries: &[ArmSummary]) -> String {
    let info = &run.info;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Evaluation {id}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>Evaluation <code>{id}</code></h1>",
        id = escape(&info.run)
    );
    let sha: String = info.dataset_sha256.chars().take(12).collect();
    let dataset = format!(
        "<code>{}</code> sha256 {}",
        escape(&info.dataset),
        escape(&sha)
    );
    let took = info
        .finished_unix_ms
        .map(|end| duration(end.saturating_sub(info.started_unix_ms) as f64));
    out.push_str("<dl class=\"header\">\n");
    for (term, value) in [
        ("Capsule", Some(escape(&info.capsule_name))),
        ("Dataset", Some(dataset)),
        ("Cases", Some(info.cases.to_string())),
        (
            "Repeat / jobs",
            Some(format!("{} / {}", info.repeat, info.jobs)),
        ),
        ("Started", Some(utc(info.started_unix_ms))),
        ("Duration", took),
        ("Version", Some(escape(&info.murmur_version))),
    ] {
        if let Some(value) = value {
            let _ = writeln!(out, "<dt>{term}</dt><dd>{value}</dd>");
        }
    }
    out.push_str("</dl>\n");

    arms_table(&mut out, run, summaries);

    out.push_str("<h2>Charts</h2>\n");
    let percent = |share: f64| (share * 100.0, format!("{}%", num(share * 100.0, 1)));
    let rows = |f: &dyn Fn(&ArmSummary) -> (f64, String)| -> Vec<(&str, (f64, String))> {
        summaries.iter().map(|s| (s.arm.as_str(), f(s))).collect()
    };
    out.push_str(&bar_chart(
        "Pass rate per arm",
        &rows(&|s| percent(s.pass_rate)),
        100.0,
    ));
    let score = rows(&|s| (s.mean_score, num(s.mean_score, 2)));
    out.push_str(&bar_chart("Mean score per arm", &score, 1.0));
    let tokens = rows(&|s| {
        let mean = s.tokens.total() as f64 / f64::from(s.runs.max(1));
        let rounded = mean.round() as u64;
        (
            mean,
            tokens(reported(&s.tokens).then_some(rounded), rounded),
        )
    });
    let most = tokens
        .iter()
        .map(|(_, (value, _))| *value)
        .fold(0.0, f64::max);
    out.push_str(&bar_chart("Mean tokens per case run", &tokens, most));
    if summaries.iter().any(|s| s.cache_hit_ratio.is_some()) {
        let cache = rows(&|s| s.cache_hit_ratio.map_or((0.0, "none".into()), percent));
        out.push_str(&bar_chart("Cache hit ratio per arm", &cache, 100.0));
    }

    matrix(&mut out, run, summaries);
    out.push_str("</body>\n</html>\n");
    out
}

const STYLE: &str = "
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1d1d1f; background: #fff; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
code { font-family: ui-monospace, monospace; font-size: 0.9em; }
.muted { color: #6e6e73; font-size: 0.9em; }
dl.header { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dl.header dt { font-weight: 600; } dl.header dd { margin: 0; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { border: 1px solid #d2d2d7; padding: 0.3rem 0.5rem; vertical-align: top; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
thead th { background: #f5f5f7; }
td.pass { background: #e8f6ec; } td.fail { background: #fdeaea; } td.mixed { background: #fff4e0; }
td.none { color: #6e6e73; }
.mark { font-weight: 700; } .pass .mark { color: #1a7f37; } .fail .mark, .mixed .mark { color: #c62828; }
.error { color: #c62828; margin: 0.2rem 0; }
details ul { margin: 0.2rem 0; padding-left: 1.2rem; }
svg { display: block; margin: 0.5rem 0 1.5rem; }
svg text { font-family: system-ui, sans-serif; font-size: 12px; fill: #1d1d1f; }
svg .bar { fill: #3b6fd8; } svg .track { fill: #f0f0f3; }
";

fn arms_table(out: &mut String, run: &Run, summaries: &[ArmSummary]) {
    out.push_str("<h2>Arms</h2>\n");
    if summaries.is_empty() {
        out.push_str("<p class=\"muted\">No arms.</p>\n");
        return;
    }
    out.push_str(
        "<table class=\"arms\">\n<thead><tr><th>Arm</th><th>Runs</th><th>Passed</th>\
         <th>Pass rate</th><th>Mean score</th><th>Tokens in</th><th>Tokens out</th>\
         <th>Cache hit</th><th>Grading tokens</th><th>Mean turns</th><th>Mean duration</th>\
         <th>Errors</th></tr></thead>\n<tbody>\n",
    );
    for s in summaries {
        let _ = write!(out, "<tr><th scope=\"row\">{}", escape(&s.arm));
        if let Some(arm) = run.info.arms.iter().find(|a| a.name == s.arm) {
            let _ = write!(out, " <span class=\"muted\">({})</span>", escape(&arm.mode));
            for note in arm
                .description
                .iter()
                .chain([&arm.summary])
                .filter(|n| !n.is_empty())
            {
                let _ = write!(out, "<br><span class=\"muted\">{}</span>", escape(note));
            }
        }
        let cache = s
            .cache_hit_ratio
            .map_or("–".into(), |r| format!("{}%", num(r * 100.0, 1)));
        let grading = match s.grading.total() {
            0 => "–".to_string(),
            total => tokens(reported(&s.grading).then_some(total), total),
        };
        out.push_str("</th>");
        for value in [
            s.runs.to_string(),
            s.passed.to_string(),
            format!("{}%", num(s.pass_rate * 100.0, 1)),
            num(s.mean_score, 2),
            tokens(s.tokens.input, s.tokens.input_estimated),
            tokens(s.tokens.output, s.tokens.output_estimated),
            cache,
            grading,
            num(s.mean_turns, 1),
            duration(s.mean_duration_ms),
            s.errors.to_string(),
        ] {
            let _ = write!(out, "<td class=\"n\">{value}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// The provider's count when it reported one, else the runtime's estimate marked as such.
fn tokens(provider: Option<u64>, estimate: u64) -> String {
    provider.map_or_else(|| format!("~{estimate} est."), |n| n.to_string())
}

/// Whether the provider reported both input and output (so `total()` is its count).
fn reported(tokens: &Tokens) -> bool {
    tokens.input.is_some() && tokens.output.is_some()
}

/// A horizontal bar chart: one row per arm, bars scaled so `scale` fills the track.
fn bar_chart(title: &str, rows: &[(&str, (f64, String))], scale: f64) -> String {
    const LABEL: f64 = 180.0;
    const TRACK: f64 = 420.0;
    const ROW: f64 = 26.0;
    const TOP: f64 = 28.0;
    let width = 720.0;
    let height = TOP + ROW * rows.len().max(1) as f64 + 8.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{width}\" height=\"{height}\" \
         viewBox=\"0 0 {width} {height}\">\n<title>{title}</title>\n\
         <text x=\"0\" y=\"16\" font-weight=\"600\">{title}</text>",
        title = escape(title)
    );
    if rows.is_empty() {
        let _ = writeln!(svg, "<text x=\"0\" y=\"{}\">No arms.</text>", TOP + 16.0);
    }
    for (index, (arm, (value, label))) in rows.iter().enumerate() {
        let y = TOP + ROW * index as f64;
        let share = if scale > 0.0 && scale.is_finite() && value.is_finite() {
            (value / scale).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let bar = (share * TRACK * 10.0).round() / 10.0;
        let short = if arm.chars().count() > 24 {
            format!("{}…", arm.chars().take(23).collect::<String>())
        } else {
            arm.to_string()
        };
        let _ = writeln!(
            svg,
            "<g><title>{arm}: {label}</title>\
             <text x=\"0\" y=\"{ty}\">{short}</text>\
             <rect class=\"track\" x=\"{LABEL}\" y=\"{y}\" width=\"{TRACK}\" height=\"18\"/>\
             <rect class=\"bar\" x=\"{LABEL}\" y=\"{y}\" width=\"{bar}\" height=\"18\"/>\
             <text x=\"{tx}\" y=\"{ty}\">{label}</text></g>",
            arm = escape(arm),
            label = escape(label),
            short = escape(&short),
            ty = y + 13.0,
            tx = LABEL + bar + 6.0,
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Cases (in order of first appearance) by arms, one cell per case and arm.
fn matrix(out: &mut String, run: &Run, summaries: &[ArmSummary]) {
    out.push_str("<h2>Cases</h2>\n");
    let mut cases: Vec<&str> = Vec::new();
    let mut arms: Vec<&str> = summaries.iter().map(|s| s.arm.as_str()).collect();
    for result in &run.results {
        if !cases.contains(&result.case.as_str()) {
            cases.push(&result.case);
        }
        if !arms.contains(&result.arm.as_str()) {
            arms.push(&result.arm);
        }
    }
    if cases.is_empty() {
        out.push_str("<p class=\"muted\">No results yet.</p>\n");
        return;
    }
    out.push_str("<table class=\"matrix\">\n<thead><tr><th>Case</th>");
    for arm in &arms {
        let _ = write!(out, "<th>{}</th>", escape(arm));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for case in &cases {
        let _ = write!(
            out,
            "<tr><th scope=\"row\"><code>{}</code></th>",
            escape(case)
        );
        for arm in &arms {
            let results: Vec<&CaseResult> = run
                .results
                .iter()
                .filter(|r| r.case == *case && r.arm == *arm)
                .collect();
            cell(out, &results, run.info.repeat);
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

fn cell(out: &mut String, results: &[&CaseResult], repeat: u32) {
    if results.is_empty() {
        out.push_str("<td class=\"none\">—</td>");
        return;
    }
    let n = results.len();
    let passed = results.iter().filter(|r| r.passed).count();
    let (class, mark) = match passed {
        p if p == n => ("pass", "✓"),
        0 => ("fail", "✗"),
        _ => ("mixed", "✗"),
    };
    let mean =
        |f: &dyn Fn(&CaseResult) -> f64| results.iter().map(|r| f(r)).sum::<f64>() / n as f64;
    let total = mean(&|r| r.tokens.total() as f64).round() as u64;
    let reported = results.iter().all(|r| reported(&r.tokens)).then_some(total);
    let _ = write!(
        out,
        "<td class=\"{class}\"><span class=\"mark\">{mark}</span> {} · {} turns · {} tokens",
        num(mean(&|r| r.score), 2),
        num(mean(&|r| r.turns as f64), if n > 1 { 1 } else { 0 }),
        tokens(reported, total),
    );
    if repeat > 1 || n > 1 {
        let _ = write!(out, "<br>{passed}/{n} passed");
    }
    // With repeats, a failing scorer and a trace link name the repeat they are of.
    let (mut failing, mut items, mut links) = (0, String::new(), String::new());
    for r in results {
        if let Some(error) = &r.error {
            let (code, message) = (escape(&error.code), escape(&error.message));
            let _ = write!(out, "<p class=\"error\"><code>{code}</code> {message}</p>");
        }
        let of = if n > 1 {
            format!(" (repeat {})", r.repeat)
        } else {
            String::new()
        };
        for s in r.scores.iter().filter(|s| !s.passed) {
            failing += 1;
            let (scorer, detail) = (escape(&s.scorer), escape(&s.detail));
            let _ = write!(items, "<li><code>{scorer}</code>{of}: {detail}</li>");
        }
        if let Some(trace) = r.trace.as_deref().filter(|t| safe_link(t)) {
            let _ = write!(links, " <a href=\"{}\">trace{of}</a>", escape(trace));
        }
    }
    if failing > 0 {
        let _ = write!(
            out,
            "<details><summary>{failing} failing</summary><ul>{items}</ul></details>"
        );
    }
    if !links.is_empty() {
        let _ = write!(out, "<br>{}", links.trim_start());
    }
    out.push_str("</td>");
}

/// Whether `path` may be a link: relative, without `..`, without `:` (so no scheme such as
/// `javascript:`), and without control characters.
fn safe_link(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with(['/', '\\'])
        && !path.contains(':')
        && !path.chars().any(char::is_control)
        && !path.split(['/', '\\']).any(|part| part == "..")
}

/// `text` made safe to place in HTML text and in quoted attributes.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `value` with `decimals` places; a dash for a value that is not a number.
fn num(value: f64, decimals: usize) -> String {
    match value.is_finite() {
        true => format!("{value:.decimals$}"),
        false => "–".to_string(),
    }
}

/// Milliseconds in the largest sensible unit.
fn duration(ms: f64) -> String {
    if !ms.is_finite() || ms < 0.0 {
        return "–".to_string();
    }
    let seconds = (ms / 1000.0).round() as u64;
    match ms {
        ms if ms < 1000.0 => format!("{ms:.0} ms"),
        ms if ms < 60_000.0 => format!("{:.1} s", ms / 1000.0),
        _ if seconds < 3600 => format!("{} min {} s", seconds / 60, seconds % 60),
        _ => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::results::{ArmInfo, CaseError, summarize};

    fn result(case: &str, arm: &str, passed: bool) -> CaseResult {
        serde_json::from_value(json!({
            "case": case, "arm": arm, "repeat": 0, "passed": passed,
            "score": if passed { 1.0 } else { 0.5 },
            "scores": [{"scorer": "exit", "passed": passed, "detail": "ok"}],
            "exit_status": "ok", "turns": 3, "tools": [], "duration_ms": 1500,
            "tokens": {"input": 200, "output": 20, "prompt": 200, "prompt_cached": 50,
                       "input_estimated": 0, "output_estimated": 0},
            "trace": format!("sessions/{case}-{arm}/trace.jsonl"),
        }))
        .unwrap()
    }

    /// Two arms, three cases; one case fails on `terse` with a hostile detail and trace.
    fn three_cases() -> Run {
        let arm = |name| {
            json!({"name": name, "description": "a <b>bold</b> try",
                                "summary": "model small", "mode": "replay"})
        };
        let info = serde_json::from_value(json!({
            "format": 1, "run": "evl_1", "dataset": "cases/hello.yaml",
            "dataset_sha256": "0123456789abcdef0123", "capsule": ".", "capsule_name": "hello",
            "arms": [arm("base"), arm("terse")], "cases": 3, "repeat": 1, "jobs": 2,
            "started_unix_ms": 1_700_000_000_000_u64, "finished_unix_ms": 1_700_000_065_000_u64,
            "murmur_version": "0.1.0",
        }))
        .unwrap();
        let mut failing = result("greets-in-french", "terse", false);
        failing.scores[0].detail = "said <script>alert(1)</script>".into();
        failing.trace = Some("javascript:alert(1)".into());
        let message = "it \"broke\"".into();
        failing.error = Some(CaseError {
            code: "E-RUN-029".into(),
            message,
        });
        failing.tokens = Tokens {
            input_estimated: 70,
            output_estimated: 7,
            ..Tokens::default()
        };
        let results = vec![
            result("greets", "base", true),
            result("greets", "terse", true),
            result("greets-in-french", "base", true),
            failing,
            result("counts", "base", true),
            result("counts", "terse", true),
        ];
        Run {
            dir: ".".into(),
            info,
            results,
        }
    }

    #[test]
    fn the_report_stands_alone_and_escapes_what_the_run_says() {
        let run = three_cases();
        let page = html(&run, &summarize(&run));
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(!page.to_lowercase().contains("<script"));
        assert!(page.contains("said &lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!page.contains("href=\"javascript:"));
        assert!(page.contains("<a href=\"sessions/greets-base/trace.jsonl\">trace</a>"));
        assert!(page.contains("a &lt;b&gt;bold&lt;/b&gt; try"));
        assert!(page.contains("<code>E-RUN-029</code> it &quot;broke&quot;"));
        assert!(page.contains("~77 est."), "an estimate is marked as one");
        assert_eq!(
            page.matches("<svg").count(),
            4,
            "pass rate, score, tokens, cache"
        );
        for name in ["base", "terse", "greets", "greets-in-french", "counts"] {
            assert!(page.contains(name), "{name} is missing");
        }
        assert!(page.contains("2023-11-14 22:13:20 UTC") && page.contains("1 min 5 s"));
        assert!(page.contains("0123456789ab") && !page.contains("0123456789abc"));
        let fetches = page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!fetches.contains("http") && !fetches.contains("url("));
        assert_eq!(
            page,
            html(&run, &summarize(&run)),
            "the same run, the same page"
        );
    }

    #[test]
    fn an_arm_without_runs_and_an_empty_run_render() {
        let mut run = three_cases();
        let mode = "live".into();
        run.info.arms.push(ArmInfo {
            name: "idle".into(),
            description: None,
            summary: String::new(),
            mode,
        });
        let mut summaries = summarize(&run);
        assert_eq!(summaries[2].runs, 0);
        summaries[0].mean_score = f64::NAN;
        let page = html(&run, &summaries);
        assert!(page.contains("idle") && !page.contains("NaN"));

        run.results.clear();
        run.info.arms.clear();
        run.info.finished_unix_ms = None;
        let page = html(&run, &summarize(&run));
        assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
        assert!(page.contains("No results yet.") && !page.contains("NaN"));
    }

    #[test]
    fn links_dates_and_escaping() {
        assert!(safe_link("sessions/s1/trace.jsonl"));
        let bad = [
            "javascript:alert(1)",
            "/etc/passwd",
            "../x",
            "a/../../b",
            "",
            "a\\..\\b",
        ];
        for bad in bad.into_iter().chain(["a\nb", "//host/x"]) {
            assert!(!safe_link(bad), "{bad:?}");
        }
        let escaped = "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;";
        assert_eq!(escape("<a href='x'>&\"</a>"), escaped);
    }
}
