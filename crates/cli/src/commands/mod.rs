pub mod build;
pub mod check;
pub mod run;
pub mod send;
pub mod tool;
