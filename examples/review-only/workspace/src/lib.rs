pub fn parse(input: &str) -> usize {
    input.len()
}
