package epoch

// Encode is the file content holding entries, for tests.
var Encode = encode
