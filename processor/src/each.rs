//! [`each`]: one piece of data for each of several consumers (pipelines, exporters): a clone
//! for each but the last, which takes the original, so a single consumer never pays a clone.

/// Pairs every item of `items` with `data`: a clone for each but the last, the original for
/// the last. Nothing when `items` is empty.
pub fn each<'a, I, T: Clone + 'a>(items: &'a [I], data: T) -> impl Iterator<Item = (&'a I, T)> {
    let last = items.len().saturating_sub(1);
    let mut data = Some(data);
    items.iter().enumerate().filter_map(move |(i, item)| {
        let d = if i == last { data.take() } else { data.clone() };
        d.map(|d| (item, d))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_for_all_but_the_last() {
        let items = ["a", "b", "c"];
        let got: Vec<(&&str, String)> = each(&items, "x".to_string()).collect();
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|(_, d)| d == "x"));
        assert_eq!(each(&[] as &[u8], 1).count(), 0);
        assert_eq!(each(&[7], 1).map(|(i, d)| i + d).sum::<u8>(), 8);
    }
}
