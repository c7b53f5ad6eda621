package epoch

// Encode is the file content holding entries, for tests.
var Encode = encode

// Decode parses a whole file's content, for tests.
var Decode = decode
