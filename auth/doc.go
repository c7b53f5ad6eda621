// Package auth holds Gantry's users and their rights, and checks the
// credentials requests carry (docs/SECURITY.md).
//
// A user has an access key and a secret key, a role and rules:
//
//   - RoleAdmin may do everything: every operation of every class;
//   - RoleCluster is a broker's, nameserver's or controller's own identity:
//     registrations, replication and elections (ClassCluster), nothing
//     else;
//   - a user without a role may publish (PUB) and subscribe (SUB) to the
//     topics and groups its rules allow: a rule names resources
//     ("Topic:orders", "Group:billing", a prefix "Topic:orders-*", "*"),
//     actions and a decision; a matching Deny beats any Allow, and what no
//     rule allows is denied.
//
// Requests prove who sends them with a signature keyed by the secret key:
// a RocketMQ remoting request exactly as the official clients sign it
// (ACL 1.0: HMAC-SHA1 over the ext field values in key order and the
// body, SignRemoting), a gRPC call with a timestamp and the method in its
// metadata (HMAC-SHA256, SignGRPC), so a captured call cannot be replayed
// once its window has passed.
//
// A Store keeps the users in a JSON file (File), reloads it when it
// changes and writes it when an admin changes a user or a rule. Checks
// read an immutable snapshot (Users): they take no lock and allocate
// nothing on success.
package auth
