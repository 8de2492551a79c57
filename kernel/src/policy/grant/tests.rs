use pretty_assertions::assert_eq;

use super::*;

#[test]
fn supported_pattern_forms() {
    use PathPattern as P;
    let dir = |d: &str, n: &str| (d.to_owned(), n.to_owned());
    assert_eq!(P::parse("README.md"), Ok(P::Exact("README.md".into())));
    assert_eq!(
        P::parse("docs/guide.md"),
        Ok(P::Exact("docs/guide.md".into()))
    );
    assert_eq!(P::parse("docs/**"), Ok(P::Subtree("docs".into())));
    assert_eq!(P::parse("**"), Ok(P::Subtree(String::new())));
    let (d, n) = dir("docs", "*.md");
    assert_eq!(P::parse("docs/*.md"), Ok(P::Children { dir: d, name: n }));
    let (d, n) = dir("", "*.md");
    assert_eq!(P::parse("*.md"), Ok(P::Children { dir: d, name: n }));
    let (d, n) = dir("src", "*.rs");
    assert_eq!(P::parse("src/**/*.rs"), Ok(P::Deep { dir: d, name: n }));
    let (d, n) = dir("", "Cargo.toml");
    assert_eq!(P::parse("**/Cargo.toml"), Ok(P::Deep { dir: d, name: n }));
}

#[test]
fn patterns_that_cannot_be_enforced_exactly_are_refused() {
    for bad in [
        "",
        "/etc/**",
        "docs/",
        "docs//a",
        "./docs/**",
        "docs/../x",
        "docs/*/index.md",
        "a**",
        "**b/x",
        "docs/**/**",
        "docs/**/a/b",
        "doc?.md",
        "docs/[ab].md",
        "docs/{a,b}.md",
        "!docs/**",
        "docs\\x",
        "docs/\"q\"",
        "~/x",
        "$HOME/x",
        "docs./x",
        "do\u{200b}cs/**",
        "a\nb",
    ] {
        assert!(PathPattern::parse(bad).is_err(), "{bad:?} was accepted");
    }
}

#[test]
fn cedar_escaping() {
    assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    assert_eq!(escape("x\u{1b}"), "x\\u{1b}");
}
