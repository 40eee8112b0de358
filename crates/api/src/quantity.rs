//! Resource quantities as Kubernetes writes them (`500m`, `2`, `128Mi`, `1G`, `1e3`), parsed
//! far enough to compare them.

/// A parsed quantity, in base units (cores, bytes).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Quantity(f64);

impl Quantity {
    /// Parses a quantity; `None` when it is not one.
    pub fn parse(text: &str) -> Option<Quantity> {
        let text = text.trim();
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(split);
        if number.is_empty() || number.starts_with('-') {
            return None;
        }
        let number: f64 = number.parse().ok()?;
        let scale = match suffix {
            "" => 1.0,
            "m" => 1e-3,
            "k" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            "P" => 1e15,
            "E" => 1e18,
            "Ki" => 1024f64,
            "Mi" => 1024f64.powi(2),
            "Gi" => 1024f64.powi(3),
            "Ti" => 1024f64.powi(4),
            "Pi" => 1024f64.powi(5),
            "Ei" => 1024f64.powi(6),
            exponent if exponent.starts_with(['e', 'E']) => 10f64.powi(exponent[1..].parse::<i32>().ok()?),
            _ => return None,
        };
        let value = number * scale;
        value.is_finite().then_some(Quantity(value))
    }

    /// The quantity in base units.
    pub fn value(self) -> f64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Quantity;

    #[test]
    fn quantities_parse_and_compare() {
        let q = |text| Quantity::parse(text).map(Quantity::value);
        assert_eq!(q("500m"), Some(0.5));
        assert_eq!(q("2"), Some(2.0));
        assert_eq!(q("128Mi"), Some(134_217_728.0));
        assert_eq!(q("1G"), Some(1e9));
        assert_eq!(q("1e3"), Some(1000.0));
        assert_eq!(q("1.5"), Some(1.5));
        for bad in ["", "m", "-1", "1x", "1.2.3", "Mi"] {
            assert_eq!(q(bad), None, "{bad:?}");
        }
        assert!(Quantity::parse("500m") < Quantity::parse("1"));
    }
}
