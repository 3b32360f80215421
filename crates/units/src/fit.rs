//! Text fitted to 80 columns: sentences wrapped at spaces, and a report's long lines carried
//! on under where their text starts, a figure never parted from its unit.

/// The width every text output fits in.
pub const WIDTH: usize = 80;

/// `text` broken at spaces into lines of at most [`WIDTH`] columns, the later ones indented
/// by `indent` spaces; a figure is not parted from its unit (`9.76 Mbit/s`).
pub fn wrap(text: &str, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    // Runs of spaces are kept (`params    x` stays aligned); a new line starts at `indent`.
    for (i, word) in glued_words(text).iter().enumerate() {
        if !line.trim().is_empty() && line.chars().count() + 1 + word.chars().count() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent);
        } else if i > 0 {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

/// `text` broken at spaces into lines of at most `width` characters (a longer word alone on
/// its line), a figure kept with its unit: a label in a table's cell.
pub fn wrap_to(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in glued_words(text) {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(&word);
            }
            _ => lines.push(word),
        }
    }
    lines
}

/// The words of `text`, a unit kept with the number before it (`2.07 k packets/s` too) and
/// a figure with its bound (`3 ns ± 1 ns`).
fn glued_words(text: &str) -> Vec<String> {
    const UNITS: [&str; 13] = [
        "%", "B", "kB", "MB", "GB", "MiB", "ns", "µs", "ms", "s", "k", "M", "ppm",
    ];
    let is_unit = |w: &str| {
        let unit = w.trim_end_matches([',', '.', ';', ':', ')']);
        UNITS.contains(&unit) || unit.ends_with("bit/s") || unit.ends_with("/s")
    };
    let mut words: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match words.last_mut() {
            Some(last)
                if word == "±"
                    || last.ends_with(" ±")
                    || is_unit(word)
                        && (last.ends_with(|c: char| c.is_ascii_digit())
                            || last.ends_with(" k")
                            || last.ends_with(" M")) =>
            {
                last.push(' ');
                last.push_str(word);
            }
            _ => words.push(word.to_string()),
        }
    }
    words
}

/// Each line of a report fitted to [`WIDTH`]: a longer one goes on under where its text
/// starts after its label ([`TEXT_COLUMN`]), broken between items (two spaces apart)
/// where it can, else between words.
pub fn fit(text: &str) -> String {
    fit_at(text, TEXT_COLUMN)
}

/// [`fit`] for a report whose text starts at `column` after its labels.
pub fn fit_at(text: &str, column: usize) -> String {
    text.split_inclusive('\n')
        .map(|line| match line.strip_suffix('\n') {
            Some(l) => fit_line(l, column) + "\n",
            None => fit_line(line, column),
        })
        .collect()
}

/// Where a report's text starts after its label: `  one-way delay      min ...`.
const TEXT_COLUMN: usize = 21;

/// The column a line goes on at: under its text (`column`), or its own indent for a line
/// that is already a continuation.
fn hang(line: &str, column: usize) -> usize {
    match line.chars().take_while(|&c| c == ' ').count() {
        indent if indent >= 4 => indent,
        _ => column,
    }
}

fn fit_line(line: &str, column: usize) -> String {
    if line.chars().count() <= WIDTH {
        return line.to_string();
    }
    let hang = hang(line, column);
    let split = line.char_indices().nth(hang).map_or(line.len(), |(i, _)| i);
    let (label, body) = line.split_at(split);
    let items = body.split("  ").map(str::trim).filter(|i| !i.is_empty());
    pack(label, items, "  ", hang)
}

/// `items` after `head`, `separator` between them, in lines of at most [`WIDTH`]: a line
/// breaks between items (ending with the separator's comma, if it has one) and goes on at
/// `hang`; an item too long for a line of its own is broken between words. No final newline.
pub fn pack<'a>(
    head: &str,
    items: impl IntoIterator<Item = &'a str>,
    separator: &str,
    hang: usize,
) -> String {
    let width = |s: &str| s.chars().count();
    let (mut out, mut current) = (String::new(), head.to_string());
    for (i, item) in items.into_iter().enumerate() {
        // Room for the comma that ends the line if the next item goes on the next one.
        let ending = width(separator.trim_end());
        if i > 0 && width(&current) + width(separator) + width(item) + ending > WIDTH {
            out.push_str(current.trim_end());
            out.push_str(separator.trim_end());
            out.push('\n');
            current = " ".repeat(hang);
        } else if i > 0 {
            current.push_str(separator);
        }
        current.push_str(item);
        if width(&current) > WIDTH {
            let wrapped = wrap(&current, hang);
            if let Some((done, last)) = wrapped.trim_end().rsplit_once('\n') {
                out.push_str(done);
                out.push('\n');
                current = last.to_string();
            }
        }
    }
    out.push_str(current.trim_end());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_long_notes() {
        let words = vec!["metric_name"; 20].join(", ");
        let text = wrap(&format!("95 % intervals: t ({words})"), 2);
        assert!(text.lines().count() > 1, "{text}");
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(text.lines().skip(1).all(|l| l.starts_with("  m")), "{text}");
        // Aligned runs of spaces kept; a figure stays with its unit.
        let text = wrap(
            &format!("{}, then 3.00 s at 9.76 Mbit/s.", "x".repeat(58)),
            0,
        );
        assert!(text.ends_with("\n9.76 Mbit/s.\n"), "{text}");
        assert_eq!(wrap("params    a b", 10), "params    a b\n");
        let text = wrap(&format!("{} offset 12.5 ms ± 3.00 µs", "x".repeat(60)), 4);
        assert!(text.ends_with("\n    12.5 ms ± 3.00 µs\n"), "{text}");
    }

    #[test]
    fn long_report_lines_go_on_under_their_text() {
        let delay = "  one-way delay      min 0 ns  mean 2.17 µs  p50 672 ns  p90 5.34 µs  p99 26.0 µs  p99.9 37.5 µs  max 37.5 µs  stddev 4.53 µs\n";
        assert_eq!(
            fit(delay),
            "  one-way delay      min 0 ns  mean 2.17 µs  p50 672 ns  p90 5.34 µs\n                     p99 26.0 µs  p99.9 37.5 µs  max 37.5 µs  stddev 4.53 µs\n"
        );
        let sender =
            "  sender (client)    4137 packets, 4.96 MB in 1.999 s: 19.9 Mbit/s, 2.07 k packets/s";
        assert_eq!(
            fit(sender),
            "  sender (client)    4137 packets, 4.96 MB in 1.999 s: 19.9 Mbit/s,\n                     2.07 k packets/s"
        );
        let continued = format!("{}{}", " ".repeat(21), "word ".repeat(20));
        let text = fit(&continued);
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        assert!(
            text.lines().all(|l| l.starts_with(&" ".repeat(21))),
            "{text}"
        );
        let pairs = ["rate_bps 20.0 Mbit/s"; 5];
        let exact = pack("p", ["x".repeat(76).as_str(), "y", "z"], ", ", 1);
        assert_eq!(exact, format!("p{},\n y, z", "x".repeat(76)));
        assert_eq!(
            pack("params    ", pairs, ", ", 10),
            "params    rate_bps 20.0 Mbit/s, rate_bps 20.0 Mbit/s, rate_bps 20.0 Mbit/s,\n          rate_bps 20.0 Mbit/s, rate_bps 20.0 Mbit/s"
        );
        let short = "  lost  0\n\nnext\n";
        assert_eq!(fit(short), short);
    }
}
