//! Real processes under the runtime.
