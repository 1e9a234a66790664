"""The library's templates: schedules written in the DSL, one module per kind of kernel and target, with the
building blocks they share (`block_reduce`, `row_reduce_cpu`)."""
