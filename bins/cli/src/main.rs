//! `kayra-cli <verb> <group> <resource> [name[/subresource]] [-n ns] [-d JSON | -f file]`, and
//! `kayra-cli apis`: the API catalog's documented command line, over the kubeconfig kubectl
//! uses. `<group>` may be a group's first label (`catalog` for `catalog.<domain>`); a named
//! object of a namespaced resource is in the context's namespace unless `-n` says otherwise.
//! Output is the server's JSON, pretty-printed, or `-o table` for what the server prints as a
//! table (lists, a history); a refusal prints the server's message and exits non-zero.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use kayra_client::{Client, ClientError};
use reqwest::Method;
use serde_json::Value;

#[derive(Parser)]
#[command(name = "kayra-cli", version, about = "Kayra's command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create an object from -d or -f.
    Create(Target),
    /// Get an object, or list a collection.
    Get(Target),
    /// Replace an object (or call a subresource such as `name/sync`) with -d or -f.
    Update(Target),
    /// Delete an object.
    Delete(Target),
    /// List every API group and its resources.
    Apis,
    /// Print the client's and the server's versions.
    Version,
}

#[derive(clap::Args)]
struct Target {
    /// The API group, or its first label (`catalog`).
    group: String,
    /// The resource (`apiregistrations`).
    resource: String,
    /// The object's name, optionally `/subresource`.
    name: Option<String>,
    /// The namespace, for namespaced resources (default: the context's, for a named object).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// The request body, as JSON.
    #[arg(short = 'd', long, conflicts_with = "file")]
    data: Option<String>,
    /// The request body, from a file (`-` for stdin).
    #[arg(short = 'f', long)]
    file: Option<String>,
    /// How to print.
    #[arg(short = 'o', long, value_enum, default_value = "json")]
    output: Output,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Json,
    Table,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    match runtime.block_on(run(cli.command)) {
        Ok(text) => {
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "kayra-cli: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command) -> Result<String, String> {
    if let Command::Version = command {
        let client = Client::from_environment().map_err(|e| e.to_string());
        let server = match &client {
            Ok(client) => match client.send(Method::GET, "/version", None).await {
                Ok(version) => version["gitVersion"].as_str().unwrap_or("unknown").to_owned(),
                Err(error) => format!("unreachable ({error})"),
            },
            Err(error) => format!("not configured ({error})"),
        };
        return Ok(format!("client {}\nserver {server}", env!("CARGO_PKG_VERSION")));
    }
    let client = Client::from_environment().map_err(|e| e.to_string())?;
    let (method, target) = match command {
        Command::Create(target) => (Method::POST, target),
        Command::Get(target) => (Method::GET, target),
        Command::Update(target) => (Method::PUT, target),
        Command::Delete(target) => (Method::DELETE, target),
        Command::Apis => return apis(&client).await.map_err(|e| e.to_string()),
        Command::Version => unreachable!("answered above"),
    };
    let group = resolve_group(&client, &target.group).await.map_err(|e| e.to_string())?;
    if method != Method::POST && method != Method::GET && target.name.is_none() {
        return Err("a name is required".to_owned());
    }
    let mut path = format!("/apis/{group}/v1");
    // A named object of a namespaced resource is in the context's namespace unless told, as
    // kubectl has it; a collection without `-n` is every namespace's.
    let namespace = match (&target.namespace, &target.name) {
        (Some(namespace), _) => Some(namespace.clone()),
        (None, Some(_)) if namespaced(&client, &path, &target.resource).await => {
            Some(client.namespace().to_owned())
        }
        (None, _) => None,
    };
    if let Some(namespace) = &namespace {
        path.push_str(&format!("/namespaces/{namespace}"));
    }
    path.push_str(&format!("/{}", target.resource));
    if let Some(name) = &target.name {
        path.push_str(&format!("/{name}"));
    }
    let body = body(&target)?;
    let wants_body = method == Method::POST || method == Method::PUT;
    if wants_body && body.is_none() {
        return Err("-d JSON or -f file is required".to_owned());
    }
    let table = matches!(target.output, Output::Table) && method == Method::GET;
    let accept = if table {
        "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"
    } else {
        "application/json"
    };
    let answer =
        client.send_accepting(method, &path, body.as_ref(), accept).await.map_err(|e| e.to_string())?;
    Ok(if table { render_table(&answer) } else { pretty(&answer) })
}

fn body(target: &Target) -> Result<Option<Value>, String> {
    let text = match (&target.data, &target.file) {
        (Some(data), _) => data.clone(),
        (None, Some(file)) if file == "-" => {
            std::io::read_to_string(std::io::stdin()).map_err(|e| e.to_string())?
        }
        (None, Some(file)) => std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?,
        (None, None) => return Ok(None),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| format!("the body is not JSON: {e}"))
}

/// Whether the group-version at `path` serves `resource` in namespaces, from its discovery.
async fn namespaced(client: &Client, path: &str, resource: &str) -> bool {
    let Ok(resources) = client.send(Method::GET, path, None).await else { return false };
    resources["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|entry| entry["name"] == resource)
        .is_some_and(|entry| entry["namespaced"] == true)
}

/// `catalog` → `catalog.<domain>`, from the server's group list; a full group name is kept.
async fn resolve_group(client: &Client, group: &str) -> Result<String, ClientError> {
    if group.contains('.') {
        return Ok(group.to_owned());
    }
    let groups = client.send(Method::GET, "/apis", None).await?;
    let names = groups["groups"].as_array().into_iter().flatten().filter_map(|g| g["name"].as_str());
    let found = names.into_iter().find(|name| name.split('.').next() == Some(group));
    Ok(found.map(str::to_owned).unwrap_or_else(|| group.to_owned()))
}

async fn apis(client: &Client) -> Result<String, ClientError> {
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let mut lines = vec![format!("{:<40} {:<32} {:<10} VERBS", "GROUP", "RESOURCE", "NAMESPACED")];
    for (path, core) in [("/api", true), ("/apis", false)] {
        let list = client.send_accepting(Method::GET, path, None, accept).await?;
        for group in list["items"].as_array().into_iter().flatten() {
            let name =
                if core { "v1 (core)" } else { group["metadata"]["name"].as_str().unwrap_or_default() };
            let version = &group["versions"][0];
            let resources = version["resources"].as_array().cloned().unwrap_or_default();
            if resources.is_empty() {
                lines.push(format!("{name:<40} {:<32} {:<10}", "-", "-"));
            }
            for resource in resources {
                let namespaced = resource["scope"] == "Namespaced";
                let plural = resource["resource"].as_str().unwrap_or_default();
                lines.push(format!("{name:<40} {plural:<32} {namespaced:<10} {}", verbs(&resource)));
                // An action or subresource is part of the resource name: `instances/restart`.
                for sub in resource["subresources"].as_array().into_iter().flatten() {
                    let sub_name = format!("{plural}/{}", sub["subresource"].as_str().unwrap_or_default());
                    lines.push(format!("{name:<40} {sub_name:<32} {namespaced:<10} {}", verbs(sub)));
                }
            }
        }
    }
    Ok(lines.join("\n"))
}

/// A discovery entry's verbs, comma-separated.
fn verbs(entry: &Value) -> String {
    let verbs: Vec<&str> =
        entry["verbs"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    verbs.join(",")
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// A server Table as aligned columns; any other list as its items' names.
fn render_table(answer: &Value) -> String {
    let cell = |value: &Value| match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let rows: Vec<Vec<String>> =
        if answer["kind"] == "Table" {
            let header = answer["columnDefinitions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["priority"].as_i64().unwrap_or(0) == 0)
                .map(|c| c["name"].as_str().unwrap_or_default().to_uppercase())
                .collect();
            let shown = answer["columnDefinitions"]
                .as_array()
                .map_or(0, |c| c.iter().filter(|c| c["priority"].as_i64().unwrap_or(0) == 0).count());
            std::iter::once(header)
                .chain(
                    answer["rows"].as_array().into_iter().flatten().map(|row| {
                        row["cells"].as_array().into_iter().flatten().take(shown).map(cell).collect()
                    }),
                )
                .collect()
        } else {
            let names = answer["items"].as_array().into_iter().flatten().map(|item| {
                let metadata = &item["metadata"];
                vec![cell(&metadata["namespace"]), cell(&metadata["name"])]
            });
            std::iter::once(vec!["NAMESPACE".to_owned(), "NAME".to_owned()]).chain(names).collect()
        };
    let widths: Vec<usize> = (0..rows.first().map_or(0, Vec::len))
        .map(|column| rows.iter().map(|row| row.get(column).map_or(0, String::len)).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|row| {
            row.iter()
                .enumerate()
                .map(|(at, cell)| format!("{cell:<width$}", width = widths[at]))
                .collect::<Vec<_>>()
                .join("   ")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}
