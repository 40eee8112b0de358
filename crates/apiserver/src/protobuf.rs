//! The Kubernetes protobuf envelope (`k8s\0` then a `runtime.Unknown`), decoded far enough for
//! the request bodies kubectl's typed clients send: `v1 Namespace` from `kubectl create
//! namespace`, the reviews of `kubectl auth`, and the CertificateSigningRequest `kubectl
//! certificate approve|deny` puts to its approval subresource. Replies are always JSON.

use serde_json::{Map, Value, json};

const MAGIC: &[u8] = b"k8s\0";

/// Decodes a protobuf request body into the JSON object it stands for.
pub(crate) fn decode(body: &[u8]) -> Result<Value, String> {
    let unknown = body.strip_prefix(MAGIC).ok_or("the body does not start with the k8s protobuf magic")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for field in Fields::new(unknown) {
        match field? {
            (1, Wire::Bytes(type_meta)) => {
                for inner in Fields::new(type_meta) {
                    match inner? {
                        (1, Wire::Bytes(text)) => api_version = utf8(text)?,
                        (2, Wire::Bytes(text)) => kind = utf8(text)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(bytes)) => raw = bytes,
            _ => {}
        }
    }
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => namespace(raw),
        ("policy/v1", "Eviction") => eviction(raw),
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => certificate_request(raw),
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => access_review(raw),
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => rules_review(raw),
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            Ok(json!({"apiVersion": api_version, "kind": kind, "metadata": {}}))
        }
        _ => Err(format!("protobuf bodies of {api_version} {kind} are not supported; send JSON")),
    }
}

fn namespace(raw: &[u8]) -> Result<Value, String> {
    let mut object = json!({"apiVersion": "v1", "kind": "Namespace"});
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(bytes)) => object["metadata"] = object_meta(bytes)?,
            (2, Wire::Bytes(bytes)) => {
                let mut finalizers = Vec::new();
                for inner in Fields::new(bytes) {
                    if let (1, Wire::Bytes(text)) = inner? {
                        finalizers.push(Value::String(utf8(text)?));
                    }
                }
                object["spec"] = json!({"finalizers": finalizers});
            }
            _ => {}
        }
    }
    Ok(object)
}

/// `policy/v1 Eviction` (what `kubectl drain` posts): metadata, and of its delete options the
/// dry run and grace period.
fn eviction(raw: &[u8]) -> Result<Value, String> {
    let mut object = json!({"apiVersion": "policy/v1", "kind": "Eviction"});
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(bytes)) => object["metadata"] = object_meta(bytes)?,
            (2, Wire::Bytes(bytes)) => {
                let mut options = Map::new();
                let mut dry_run = Vec::new();
                for inner in Fields::new(bytes) {
                    match inner? {
                        (1, Wire::Varint(seconds)) => {
                            // An int64 travels as its two's complement.
                            options.insert("gracePeriodSeconds".into(), json!(seconds.cast_signed()));
                        }
                        (5, Wire::Bytes(text)) => dry_run.push(Value::String(utf8(text)?)),
                        _ => {}
                    }
                }
                if !dry_run.is_empty() {
                    options.insert("dryRun".into(), Value::Array(dry_run));
                }
                object["deleteOptions"] = Value::Object(options);
            }
            _ => {}
        }
    }
    Ok(object)
}

/// `CertificateSigningRequest`: metadata, spec and status (conditions and certificate).
fn certificate_request(raw: &[u8]) -> Result<Value, String> {
    use base64::Engine;
    let base64 = |bytes: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    let mut object = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest"});
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(bytes)) => object["metadata"] = object_meta(bytes)?,
            (2, Wire::Bytes(bytes)) => {
                let mut spec = Map::new();
                let (mut usages, mut groups) = (Vec::new(), Vec::new());
                for inner in Fields::new(bytes) {
                    match inner? {
                        (1, Wire::Bytes(request)) => {
                            spec.insert("request".into(), base64(request));
                        }
                        (2, Wire::Bytes(text)) => {
                            spec.insert("username".into(), Value::String(utf8(text)?));
                        }
                        (3, Wire::Bytes(text)) => {
                            spec.insert("uid".into(), Value::String(utf8(text)?));
                        }
                        (4, Wire::Bytes(text)) => groups.push(Value::String(utf8(text)?)),
                        (5, Wire::Bytes(text)) => usages.push(Value::String(utf8(text)?)),
                        (7, Wire::Bytes(text)) => {
                            spec.insert("signerName".into(), Value::String(utf8(text)?));
                        }
                        (8, Wire::Varint(seconds)) => {
                            spec.insert("expirationSeconds".into(), json!(seconds as i32));
                        }
                        _ => {}
                    }
                }
                if !usages.is_empty() {
                    spec.insert("usages".into(), Value::Array(usages));
                }
                if !groups.is_empty() {
                    spec.insert("groups".into(), Value::Array(groups));
                }
                object["spec"] = Value::Object(spec);
            }
            (3, Wire::Bytes(bytes)) => {
                let mut status = Map::new();
                let mut conditions = Vec::new();
                for inner in Fields::new(bytes) {
                    match inner? {
                        (1, Wire::Bytes(condition)) => conditions.push(csr_condition(condition)?),
                        (2, Wire::Bytes(certificate)) if !certificate.is_empty() => {
                            status.insert("certificate".into(), base64(certificate));
                        }
                        _ => {}
                    }
                }
                if !conditions.is_empty() {
                    status.insert("conditions".into(), Value::Array(conditions));
                }
                object["status"] = Value::Object(status);
            }
            _ => {}
        }
    }
    Ok(object)
}

/// One condition of a certificate request: type, reason, message, times and status.
fn csr_condition(raw: &[u8]) -> Result<Value, String> {
    let mut condition = Map::new();
    for field in Fields::new(raw) {
        let (number, wire) = field?;
        let name = match number {
            1 => "type",
            2 => "reason",
            3 => "message",
            4 => "lastUpdateTime",
            5 => "lastTransitionTime",
            6 => "status",
            _ => continue,
        };
        match (number, wire) {
            (4 | 5, Wire::Bytes(time)) => {
                if let Some(time) = timestamp(time)? {
                    condition.insert(name.into(), Value::String(time));
                }
            }
            (_, Wire::Bytes(text)) => {
                condition.insert(name.into(), Value::String(utf8(text)?));
            }
            _ => {}
        }
    }
    Ok(Value::Object(condition))
}

/// A `meta.v1.Time` (seconds since the epoch, nanoseconds dropped) in RFC 3339; `None` for the
/// zero time.
fn timestamp(raw: &[u8]) -> Result<Option<String>, String> {
    let mut seconds = 0i64;
    for field in Fields::new(raw) {
        if let (1, Wire::Varint(value)) = field? {
            seconds = value as i64;
        }
    }
    if seconds == 0 {
        return Ok(None);
    }
    let time =
        jiff::Timestamp::from_second(seconds).map_err(|_| "a protobuf time is out of range".to_owned())?;
    Ok(Some(time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

/// `SelfSubjectAccessReview`: its spec's resource or non-resource attributes.
fn access_review(raw: &[u8]) -> Result<Value, String> {
    let mut spec = Map::new();
    for field in Fields::new(raw) {
        if let (2, Wire::Bytes(bytes)) = field? {
            for inner in Fields::new(bytes) {
                match inner? {
                    (1, Wire::Bytes(attributes)) => {
                        let names =
                            ["namespace", "verb", "group", "version", "resource", "subresource", "name"];
                        spec.insert("resourceAttributes".into(), strings(attributes, &names)?);
                    }
                    (2, Wire::Bytes(attributes)) => {
                        spec.insert("nonResourceAttributes".into(), strings(attributes, &["path", "verb"])?);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {}, "spec": spec}),
    )
}

/// `SelfSubjectRulesReview`: the namespace its spec asks about.
fn rules_review(raw: &[u8]) -> Result<Value, String> {
    let mut spec = Value::Object(Map::new());
    for field in Fields::new(raw) {
        if let (2, Wire::Bytes(bytes)) = field? {
            spec = strings(bytes, &["namespace"])?;
        }
    }
    Ok(
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "metadata": {}, "spec": spec}),
    )
}

/// A message of string fields, numbered from 1 in the order of `names`.
fn strings(raw: &[u8], names: &[&str]) -> Result<Value, String> {
    let mut map = Map::new();
    for field in Fields::new(raw) {
        if let (number, Wire::Bytes(text)) = field?
            && let Some(name) =
                usize::try_from(number).ok().and_then(|n| n.checked_sub(1)).and_then(|n| names.get(n))
        {
            map.insert((*name).to_owned(), Value::String(utf8(text)?));
        }
    }
    Ok(Value::Object(map))
}

fn object_meta(raw: &[u8]) -> Result<Value, String> {
    let mut meta = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(text)) => {
                meta.insert("name".into(), Value::String(utf8(text)?));
            }
            (2, Wire::Bytes(text)) => {
                meta.insert("generateName".into(), Value::String(utf8(text)?));
            }
            (3, Wire::Bytes(text)) => {
                meta.insert("namespace".into(), Value::String(utf8(text)?));
            }
            (5, Wire::Bytes(text)) => {
                meta.insert("uid".into(), Value::String(utf8(text)?));
            }
            (6, Wire::Bytes(text)) => {
                meta.insert("resourceVersion".into(), Value::String(utf8(text)?));
            }
            (11, Wire::Bytes(entry)) => {
                let (key, value) = map_entry(entry)?;
                labels.insert(key, Value::String(value));
            }
            (12, Wire::Bytes(entry)) => {
                let (key, value) = map_entry(entry)?;
                annotations.insert(key, Value::String(value));
            }
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    Ok(Value::Object(meta))
}

fn map_entry(raw: &[u8]) -> Result<(String, String), String> {
    let (mut key, mut value) = (String::new(), String::new());
    for field in Fields::new(raw) {
        match field? {
            (1, Wire::Bytes(text)) => key = utf8(text)?,
            (2, Wire::Bytes(text)) => value = utf8(text)?,
            _ => {}
        }
    }
    Ok((key, value))
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a protobuf string is not UTF-8".to_owned())
}

/// A field's payload.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// The fields of one protobuf message, in order.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8]) -> Fields<'a> {
        Fields { rest: bytes }
    }

    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.rest.split_first().ok_or("truncated varint")?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 64 bits".to_owned())
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], String> {
        if len > self.rest.len() {
            return Err("truncated field".to_owned());
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Wire<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let field = (|| {
            let tag = self.varint()?;
            let wire = match tag & 7 {
                0 => self.varint().map(Wire::Varint)?,
                1 => self.take(8).map(|_| Wire::Fixed)?,
                2 => {
                    let len = usize::try_from(self.varint()?).map_err(|_| "length too large")?;
                    Wire::Bytes(self.take(len)?)
                }
                5 => self.take(4).map(|_| Wire::Fixed)?,
                other => return Err(format!("unsupported protobuf wire type {other}")),
            };
            Ok((tag >> 3, wire))
        })();
        if field.is_err() {
            self.rest = &[];
        }
        Some(field)
    }
}

#[cfg(test)]
mod tests;
