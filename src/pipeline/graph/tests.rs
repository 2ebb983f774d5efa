// Graph validation tests are added with the operators.
