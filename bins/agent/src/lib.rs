//! The node agent: `join` makes the node a member of the fleet (the controller's CA pinned by
//! hash, a bootstrap token, a key and certificate request made locally); `run` holds the node's
//! session with the controller and runs the node's Applications. The binary (`main.rs`) and the
//! controller's in-process local node both start the agent through here.

pub mod session;
